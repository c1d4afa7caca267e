/**
 * The run report of `skein status` and `skein run` (in process): a compensation that fails for
 * good shows in the compensations table, the rows after it skipped, and the run says it needs
 * attention and how to redrive it; the live view's event lines tell the same.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import agents from "../../examples/order-approval/agents.js";
import { formatEventLine, RunProgress } from "../../src/cli/live-view.js";
import { runReport } from "../../src/cli/summary.js";
import { NonRetryableError } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";
import { ORDER_APPROVAL } from "./helpers.js";

describe("run report", () => {
  it("has a usage line when the run reported usage or has a budget, none otherwise", async () => {
    const { engine } = await testEngine({
      agents: {
        writer: (t) => {
          t.reportUsage({ tokens_in: 120, tokens_out: 30, cost: 0.1 });
          t.reportUsage({ cost: 0.2 }); // 0.1 + 0.2 shown as people write it, not 0.30000000000000004
          return { ok: true };
        },
        quiet: () => ({ ok: true }),
      },
    });
    await engine.registerWorkflow({ id: "spend", nodes: [{ node_id: "w", agent_type: "writer" }] });
    await engine.registerWorkflow({ id: "quiet", nodes: [{ node_id: "q", agent_type: "quiet" }] });
    const spent = await engine.waitForRun((await engine.startRun("spend", { budget: { max_cost: 1 } })).run_id);
    expect(runReport(spent, await engine.listVisits(spent.run_id))).toContain(
      "\nusage: 150 tokens (in 120, out 30), cost 0.3; budget: max_cost 1\n",
    );
    const quiet = await engine.waitForRun((await engine.startRun("quiet")).run_id);
    expect(runReport(quiet, await engine.listVisits(quiet.run_id))).not.toContain("usage:");
  });

  it("lists the durable steps a run's attempts recorded, by node and visit", async () => {
    const { engine } = await testEngine({
      agents: {
        research: async (t) => {
          await t.step("plan", () => ({ topics: 2 }));
          await t.step("search:0", () => "found");
          return { ok: true };
        },
        quiet: () => ({ ok: true }),
      },
    });
    await engine.registerWorkflow({
      id: "stepped",
      nodes: [
        { node_id: "r", agent_type: "research" },
        { node_id: "q", agent_type: "quiet", depends_on: ["r"] },
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("stepped")).run_id);
    const steps = await engine.listSteps(run.run_id);
    const report = runReport(run, await engine.listVisits(run.run_id), Date.now(), steps);
    expect(report).toMatch(
      /\nsteps:\nnode +step +attempt +size +recorded\nr#1 +plan +1 +12 B +\S+.*\nr#1 +search:0 +1 +7 B +\S+/,
    );
    expect(runReport(run, await engine.listVisits(run.run_id))).not.toContain("steps:");
  });

  it("lists a parent's child runs, and says whose child a child run is", async () => {
    const { engine } = await testEngine({ agents: { writer: () => ({ ok: true }) } });
    await engine.registerWorkflow({ id: "inner", nodes: [{ node_id: "w", agent_type: "writer" }] });
    await engine.registerWorkflow({
      id: "outer",
      nodes: [{ node_id: "sub", agent_type: "workflow", payload: { workflow_id: "inner" } }],
    });
    const run = await engine.startRun("outer");
    const done = await engine.waitForRun(run.run_id);
    const kid = done.children[0]?.run_id ?? "";
    expect(runReport(done, await engine.listVisits(run.run_id))).toMatch(
      new RegExp(`\nchild runs:\nnode +visit +attempt +run +workflow +status\nsub +1 +1 +${kid} +inner +SUCCEEDED\n`),
    );
    const child = await engine.getRun(kid);
    expect(runReport(child, await engine.listVisits(kid))).toContain(
      `\nchild of run ${run.run_id} (node sub, visit 1, attempt 1)\n`,
    );
  });

  it("lists the compensations in order and says when the run needs attention", async () => {
    const { engine } = await testEngine({
      agents: {
        ...agents,
        payments_refund: () => {
          throw new NonRetryableError("the payment provider refused the refund");
        },
      },
    });
    await engine.registerWorkflow(JSON.parse(readFileSync(ORDER_APPROVAL.workflow, "utf8")));
    const requested = nextEvent(engine, (e) => e.type === "review.requested");
    const run = await engine.startRun("order-approval", {
      input: { order_id: "A-1", sku: "SKU-9", quantity: 2, amount: 49.5 },
    });
    await requested;
    await engine.review(run.run_id, "approval", { decision: "reject", by: "finance" });
    const done = await engine.waitForRun(run.run_id);
    expect(done).toMatchObject({ status: "FAILED", needs_attention: true });

    const report = runReport(done, await engine.listVisits(run.run_id));
    expect(report).toContain(
      `\nneeds attention: a compensation failed for good; undo its effect by hand, then skein retry ${run.run_id} --force\n`,
    );
    expect(report).toMatch(
      /\ncompensations:\nseq +node +agent_type +state +attempts +note\n1 +charge_card#1 +payments_refund +FAILED +1 +the payment provider refused the refund\n2 +reserve_stock#1 +inventory_release +SKIPPED +0 +compensation_failed$/,
    );

    // The live view's rows and lines for the same story.
    const events = await engine.listEvents(run.run_id);
    const progress = new RunProgress({ ...done, status: "RUNNING", ended_at: null, nodes: [], compensations: [] });
    const requestedAt = events.findIndex((e) => e.type === "review.requested");
    for (const e of events.slice(0, requestedAt + 1)) progress.apply(e);
    expect(progress.rows.get("approval")).toMatchObject({
      state: "IN_REVIEW",
      note: "waiting for ops-lead or finance",
    });
    for (const e of events.slice(requestedAt + 1)) {
      progress.apply(e);
      if (e.type === "compensation.planned") expect(progress.status).toBe("COMPENSATING");
    }
    expect(progress.status).toBe("FAILED");
    expect(progress.rows.get("charge_card")?.note).toBe("compensation failed: the payment provider refused the refund");
    const lines = events.map((e) => formatEventLine(e, run.created_at));
    for (const line of [
      /review\.requested approval#1 waiting for ops-lead or finance: Approve order A-1: 2 x SKU-9$/,
      /review\.decided +approval#1 reject by finance$/,
      /compensation\.planned undo charge_card#1, reserve_stock#1$/,
      /compensation\.failed charge_card#1 non_retryable: the payment provider refused the refund$/,
      /compensation\.skipped reserve_stock#1 compensation_failed$/,
      /run\.needs_attention charge_card#1 compensation \S+:compensate failed for good/,
    ]) {
      expect(lines).toContainEqual(expect.stringMatching(line));
    }
  });
});
