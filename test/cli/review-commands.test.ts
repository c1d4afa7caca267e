/**
 * `skein reviews`, `review`, `cancel` and `retry`: each a client process deciding on runs that a
 * `skein engine` process runs (examples/order-approval). The engine notices a client's write on
 * its next sweep; the tests wait for what a user would see (`skein reviews`, `skein status`),
 * never for a fixed time.
 */
import { describe, expect, it } from "vitest";
import {
  commandsMs,
  json,
  ORDER_APPROVAL,
  type Result,
  requireBuiltCli,
  Skein,
  skein,
  until,
  workspace,
} from "./helpers.js";

requireBuiltCli();

/** Several commands and engine sweeps per test: more than the default bound. */
const TEST_MS = 120_000;

interface PendingJson {
  run_id: string;
  node_id: string;
  visit: number;
  execution_id: string;
  title: string;
  instructions: string;
  assignees: string[];
  data: Record<string, unknown>;
  deadline_at: number;
}

interface VisitJson {
  node_id: string;
  visit: number;
  state: string;
  output: Record<string, unknown> | null;
  reason: string | null;
}

interface CompensationJson {
  seq: number;
  node_id: string;
  visit: number;
  agent_type: string;
  state: string;
  execution_id: string;
  output: Record<string, unknown> | null;
  started_at: number | null;
  ended_at: number | null;
}

interface RunJson {
  run_id: string;
  status: string;
  needs_attention: boolean;
  error: { message: string } | null;
  output: Record<string, unknown> | null;
  nodes: VisitJson[];
  compensations: CompensationJson[];
}

const ORDER = { order_id: "A-1", sku: "SKU-9", quantity: 2, amount: 49.5 };

/** A database with the example registered and a `skein engine` serving it with the example's agents. */
async function servedExample() {
  const ws = workspace();
  const db = ["--db", ws.db];
  const put = await skein(["workflows", "put", ORDER_APPROVAL.workflow, ...db], ws.dir);
  expect(put.code, put.stderr).toBe(0);
  const engine = new Skein(["engine", "--agents", ORDER_APPROVAL.agents, ...db], ws.dir);
  await engine.waitFor(/"msg":"engine started/);
  const cli = (...args: string[]) => skein([...args, ...db], ws.dir);
  return {
    cli,
    async start(order: Partial<typeof ORDER> = {}): Promise<string> {
      const r = await cli("start", "order-approval", "--input", JSON.stringify({ ...ORDER, ...order }));
      expect(r.code, r.stderr).toBe(0);
      return r.stdout.trim();
    },
    /** The run's review once `skein reviews` lists it (at `visit`). */
    async pending(runId: string, visit = 1): Promise<PendingJson> {
      const list = await until(
        `skein reviews lists ${runId} at visit ${visit}`,
        async () => json<PendingJson[]>(await cli("reviews", "--json")),
        (reviews) => reviews.some((r) => r.run_id === runId && r.visit === visit),
      );
      return list.find((r) => r.run_id === runId) as PendingJson;
    },
    /** The run once `skein status --json` shows it with `status`. */
    async status(runId: string, status: string): Promise<RunJson> {
      return until(
        `run ${runId} is ${status}`,
        async () => json<RunJson>(await cli("status", runId, "--json")),
        (run) => run.status === status,
      );
    },
    /** Stops the engine with SIGTERM: it exits 0. */
    async stop(): Promise<void> {
      engine.proc.kill("SIGTERM");
      const r = await engine.result();
      expect(r.code, r.stderr).toBe(0);
    },
  };
}

function refused(r: Result, message: RegExp): void {
  expect(r.code, r.stdout).toBe(2);
  expect(r.stdout).toBe("");
  expect(r.stderr).toMatch(message);
}

const node = (run: RunJson, id: string) => run.nodes.find((n) => n.node_id === id);

describe("skein reviews and skein review", () => {
  it(
    "lists the pending review; an assignee's approval finishes the run; a second decision is a conflict; a non-assignee is refused",
    async () => {
      const ex = await servedExample();
      const runId = await ex.start();
      const review = await ex.pending(runId);
      expect(review).toMatchObject({
        node_id: "approval",
        visit: 1,
        execution_id: `${runId}:approval:1`,
        title: "Approve order A-1: 2 x SKU-9",
        assignees: ["ops-lead", "finance"],
        data: { order: ORDER, charge: { amount: 49.5 } },
      });
      const text = await ex.cli("reviews");
      expect(text.code).toBe(0);
      const [header, row] = text.stdout.trimEnd().split("\n");
      expect(header).toMatch(/^run_id +node_id +title +assignees +time left$/);
      // The review waits 12 h (the node's timeout): hours and minutes are left.
      expect(row).toMatch(
        new RegExp(`^${runId} {2}approval {2}Approve order A-1: 2 x SKU-9 {2}ops-lead, finance {2}1[01] h \\d\\d min$`),
      );

      refused(
        await ex.cli("review", runId, "approval", "approve", "--by", "mallory"),
        /^skein: mallory may not decide approval: assignees are ops-lead, finance; pass one of them as --by\n$/,
      );
      refused(
        await ex.cli("review", runId, "approval", "approve"),
        /^skein: an anonymous reviewer may not decide approval: assignees are ops-lead, finance/,
      );
      // The refusals changed nothing: the review still waits.
      expect(json<PendingJson[]>(await ex.cli("reviews", "--json")).map((r) => r.run_id)).toEqual([runId]);

      const approved = await ex.cli(
        "review",
        runId,
        "approval",
        "approve",
        "--by",
        "ops-lead",
        "--comment",
        "stock checked",
        "--output",
        '{"gift_wrap":true}',
      );
      expect(approved.code, approved.stderr).toBe(0);
      // The engine may already have shipped it by the time the command reads the run back.
      expect(approved.stdout).toMatch(
        new RegExp(`^approval#1 SUCCEEDED \\(approved by ops-lead\\)\\nrun ${runId} (RUNNING|SUCCEEDED)\\n$`),
      );

      const done = await ex.status(runId, "SUCCEEDED");
      expect(node(done, "approval")?.output).toEqual({
        decision: "approve",
        by: "ops-lead",
        comment: "stock checked",
        output: { gift_wrap: true },
      });
      expect(node(done, "ship")).toMatchObject({ state: "SUCCEEDED", output: { order_id: "A-1" } });
      expect(done.compensations).toEqual([]);

      const again = await ex.cli("review", runId, "approval", "reject", "--by", "finance");
      refused(
        again,
        new RegExp(
          `^skein: node approval of run ${runId} is not waiting for this decision: it is SUCCEEDED; skein reviews lists what waits for review\\n$`,
        ),
      );
      expect((await ex.cli("reviews")).stdout).toBe("no reviews waiting\n");
      await ex.stop();
    },
    TEST_MS,
  );

  it(
    "a rejection fails the run after its compensations ran newest first (refund, then release); retry asks again, and approval finishes it",
    async () => {
      const ex = await servedExample();
      const runId = await ex.start();
      await ex.pending(runId);
      const rejected = await ex.cli(
        "review",
        runId,
        "approval",
        "reject",
        "--by",
        "finance",
        "--comment",
        "card flagged",
      );
      expect(rejected.code, rejected.stderr).toBe(0);
      expect(rejected.stdout).toMatch(
        new RegExp(
          `^approval#1 FAILED \\(rejected by finance: card flagged\\)\\nrun ${runId} (COMPENSATING|FAILED)\\n$`,
        ),
      );

      const failed = await ex.status(runId, "FAILED");
      expect(failed.error?.message).toBe("node approval failed (rejected): rejected by finance: card flagged");
      expect(failed.needs_attention).toBe(false);
      expect(node(failed, "ship")).toMatchObject({ state: "SKIPPED", reason: "run_failed" });
      const charge = node(failed, "charge_card")?.output as { charge_id: string; amount: number };
      const reservation = node(failed, "reserve_stock")?.output as { reservation_id: string };
      const [refund, release] = failed.compensations;
      expect(failed.compensations).toHaveLength(2);
      expect(refund).toMatchObject({
        seq: 1,
        node_id: "charge_card",
        visit: 1,
        agent_type: "payments_refund",
        state: "SUCCEEDED",
        execution_id: `${runId}:charge_card:1:compensate`,
        // The compensation's payload read the charge's output through {{ self.output... }}.
        output: { refunded: charge.charge_id, amount: 49.5 },
      });
      expect(release).toMatchObject({
        seq: 2,
        node_id: "reserve_stock",
        agent_type: "inventory_release",
        state: "SUCCEEDED",
        output: { released: reservation.reservation_id },
      });
      // One at a time, in seq order: the release started after the refund ended.
      expect(release?.started_at).toBeGreaterThanOrEqual(refund?.ended_at ?? Number.POSITIVE_INFINITY);

      const text = (await ex.cli("status", runId)).stdout;
      expect(text).toMatch(new RegExp(`^run ${runId} {2}order-approval v1 {2}FAILED {2}in `));
      expect(text).toMatch(
        /\ncompensations:\nseq +node +agent_type +state +attempts +note\n1 +charge_card#1 +payments_refund +SUCCEEDED +1\n2 +reserve_stock#1 +inventory_release +SUCCEEDED +1\n/,
      );
      expect(text).not.toContain("needs attention");
      const events = (await ex.cli("events", runId, "--json")).stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { type: string; node_id: string | null });
      expect(events.filter((e) => e.type === "compensation.succeeded").map((e) => e.node_id)).toEqual([
        "charge_card",
        "reserve_stock",
      ]);

      // Redrive: the undone steps and the review run again.
      const retried = await ex.cli("retry", runId);
      expect(retried.code, retried.stderr).toBe(0);
      expect(retried.stdout).toBe(`run ${runId} RUNNING; runs again: reserve_stock, charge_card, approval, ship\n`);
      const second = await ex.pending(runId, 2);
      expect(second.execution_id).toBe(`${runId}:approval:2`);
      // A decision for the first round is refused now.
      refused(
        await ex.cli(
          "review",
          runId,
          "approval",
          "approve",
          "--by",
          "ops-lead",
          "--execution-id",
          `${runId}:approval:1`,
        ),
        new RegExp(`is not waiting for this decision: its current round is ${runId}:approval:2`),
      );
      const approved = await ex.cli(
        "review",
        runId,
        "approval",
        "approve",
        "--by",
        "finance",
        "--execution-id",
        second.execution_id,
      );
      expect(approved.code, approved.stderr).toBe(0);
      expect(approved.stdout).toMatch(/^approval#2 SUCCEEDED \(approved by finance\)\n/);

      const done = await ex.status(runId, "SUCCEEDED");
      expect(done.nodes.map((n) => [n.node_id, n.visit, n.state])).toEqual([
        ["reserve_stock", 2, "SUCCEEDED"],
        ["charge_card", 2, "SUCCEEDED"],
        ["approval", 2, "SUCCEEDED"],
        ["ship", 2, "SUCCEEDED"],
      ]);
      refused(
        await ex.cli("retry", runId),
        new RegExp(`^skein: run ${runId} is SUCCEEDED; only a FAILED or CANCELLED run can be retried\\n$`),
      );
      await ex.stop();
    },
    TEST_MS,
  );
});

describe("skein cancel and skein retry", () => {
  it(
    "cancels a running run (with --compensate: undone, then CANCELLED); a finished run is a conflict",
    async () => {
      const ex = await servedExample();
      const plain = await ex.start({ order_id: "A-1" });
      const undone = await ex.start({ order_id: "A-2" });
      await ex.pending(plain);
      await ex.pending(undone);

      const cancelled = await ex.cli("cancel", plain, "--reason", "customer withdrew");
      expect(cancelled.code, cancelled.stderr).toBe(0);
      expect(cancelled.stdout).toBe(`run ${plain} CANCELLED\n`);
      const run = json<RunJson>(await ex.cli("status", plain, "--json"));
      expect(run).toMatchObject({ status: "CANCELLED", error: { message: "customer withdrew" }, compensations: [] });
      expect(node(run, "approval")).toMatchObject({ state: "CANCELLED", reason: "run_cancelled" });
      expect(node(run, "ship")).toMatchObject({ state: "SKIPPED", reason: "run_cancelled" });
      refused(
        await ex.cli("cancel", plain),
        new RegExp(`^skein: run ${plain} already ended CANCELLED; nothing to cancel\\n$`),
      );
      refused(
        await ex.cli("review", plain, "approval", "approve", "--by", "ops-lead"),
        /is not waiting for this decision: it is CANCELLED/,
      );
      // Only the other run's review still waits.
      expect(json<PendingJson[]>(await ex.cli("reviews", "--json")).map((r) => r.run_id)).toEqual([undone]);

      const compensating = await ex.cli("cancel", undone, "--compensate", "--json");
      expect(compensating.code, compensating.stderr).toBe(0);
      expect(json<RunJson>(compensating)).toMatchObject({ run_id: undone, status: "COMPENSATING" });
      const ended = await ex.status(undone, "CANCELLED");
      expect(ended.compensations.map((c) => [c.seq, c.node_id, c.state])).toEqual([
        [1, "charge_card", "SUCCEEDED"],
        [2, "reserve_stock", "SUCCEEDED"],
      ]);
      refused(await ex.cli("cancel", undone, "--compensate"), /already ended CANCELLED; nothing to cancel/);
      await ex.stop();
    },
    TEST_MS,
  );
});

describe("review, cancel and retry refusals (no engine needed)", () => {
  it(
    "exits 2 with what is wrong: unknown run, bad decision or --output, a review not requested, a running run retried",
    async () => {
      const ws = workspace();
      const db = ["--db", ws.db];
      await skein(["workflows", "put", ORDER_APPROVAL.workflow, ...db], ws.dir);
      const runId = (
        await skein(["start", "order-approval", "--input", JSON.stringify(ORDER), ...db], ws.dir)
      ).stdout.trim();
      const cli = (...args: string[]) => skein([...args, ...db], ws.dir);

      const results = await Promise.all([
        cli("review", "nope", "approval", "approve"),
        cli("cancel", "nope"),
        cli("retry", "nope"),
        cli("review", runId, "approval", "maybe"),
        cli("review", runId, "approval", "approve", "--output", "{bad"),
        cli("review", runId, "approval", "reject", "--output", "{}"),
        cli("review", runId, "nope", "reject"),
        // No engine ran the run: the review was never requested.
        cli("review", runId, "approval", "approve", "--by", "ops-lead"),
        cli("retry", runId),
      ]);
      const [
        unknownReview,
        unknownCancel,
        unknownRetry,
        badDecision,
        badOutput,
        rejectOutput,
        noNode,
        notYet,
        running,
      ] = results;
      for (const r of [unknownReview, unknownCancel, unknownRetry])
        refused(r as Result, /^skein: run nope does not exist in (sqlite|postgres):.*; skein list shows the runs\n$/);
      refused(
        badDecision as Result,
        /value 'maybe' is invalid for argument 'decision'\. Allowed choices are approve, reject/,
      );
      refused(badOutput as Result, /^skein: --output is not valid JSON: /);
      refused(rejectOutput as Result, /^skein: --output is for approve/);
      refused(noNode as Result, new RegExp(`^skein: run ${runId} has no node "nope"`));
      refused(notYet as Result, /is not waiting for this decision: it is PENDING/);
      refused(running as Result, /is RUNNING; only a FAILED or CANCELLED run can be retried/);
      expect((await cli("reviews")).stdout).toBe("no reviews waiting\n");

      // A cancelled run retried from a node the workflow does not have.
      const cancelled = await cli("cancel", runId);
      expect(cancelled.stdout).toBe(`run ${runId} CANCELLED\n`);
      refused(
        await cli("retry", runId, "--from", "nope"),
        /^skein: workflow order-approval has no node "nope" to retry from/,
      );
    },
    commandsMs(15),
  );

  it("refuses an approval for a node the run does not have, like a rejection (exit 2)", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ORDER_APPROVAL.workflow, ...db], ws.dir);
    const started = await skein(["start", "order-approval", "--input", JSON.stringify(ORDER), ...db], ws.dir);
    const runId = started.stdout.trim();
    refused(
      await skein(["review", runId, "nope", "approve", "--by", "ops-lead", ...db], ws.dir),
      new RegExp(`^skein: run ${runId} has no node "nope"`),
    );
  });
});
