/**
 * `skein events <run> --follow`: a client process printing a run's history and then its new
 * events, while a `skein engine` process (examples/order-approval) runs it and a third process
 * decides its review; its exit code is the run's, or 130 on SIGINT.
 */
import { describe, expect, it } from "vitest";
import { ORDER_APPROVAL, requireBuiltCli, Skein, skein, workspace } from "./helpers.js";

requireBuiltCli();

const TEST_MS = 120_000;
const ORDER = { order_id: "A-1", sku: "SKU-9", quantity: 2, amount: 49.5 };

async function servedExample() {
  const ws = workspace();
  const db = ["--db", ws.db];
  const put = await skein(["workflows", "put", ORDER_APPROVAL.workflow, ...db], ws.dir);
  expect(put.code, put.stderr).toBe(0);
  const engine = new Skein(["engine", "--agents", ORDER_APPROVAL.agents, ...db], ws.dir);
  await engine.waitFor(/"msg":"engine started/);
  const cli = (...args: string[]) => skein([...args, ...db], ws.dir);
  const start = async () => {
    const r = await cli("start", "order-approval", "--input", JSON.stringify(ORDER));
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim();
  };
  const follow = (...args: string[]) => new Skein(["events", ...args, "--follow", ...db], ws.dir);
  return { cli, start, follow };
}

describe("skein events --follow", () => {
  it(
    "prints the history, then each new event once as another process's engine writes it, and exits 0 when the run succeeds",
    async () => {
      const ex = await servedExample();
      const runId = await ex.start();
      const follower = ex.follow(runId.slice(-10));
      await follower.waitFor(/review\.requested +approval#1/);
      const decided = await ex.cli("review", runId, "approval", "approve", "--by", "ops-lead");
      expect(decided.code, decided.stderr).toBe(0);
      const r = await follower.result();
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^run \S+ \(order-approval v1\), times since /);
      expect(r.stdout).toMatch(/review\.decided +approval#1 approve by ops-lead/);
      expect(r.stdout.trimEnd()).toMatch(/run\.succeeded +SUCCEEDED$/);
      // Every stored event once, in order.
      const stored = (await ex.cli("events", runId, "--json")).stdout.trim().split("\n");
      const types = stored.map((l) => (JSON.parse(l) as { type: string }).type);
      const printed = [...r.stdout.matchAll(/^ +\d+ ms {2}(\S+)/gm)].map((m) => m[1]);
      expect(printed).toEqual(types);
    },
    TEST_MS,
  );

  it(
    "exits 1 at once for a run that already ended CANCELLED, and 130 on SIGINT while it waits",
    async () => {
      const ex = await servedExample();
      const waiting = await ex.start();
      const follower = ex.follow(waiting, "--json");
      await follower.waitFor(/"type":"review.requested"/);
      expect(follower.stdout).toMatch(/"at_iso":"\d{4}-/);
      follower.proc.kill("SIGINT");
      const stopped = await follower.result();
      expect(stopped.code, stopped.stderr).toBe(130);

      const cancelled = await ex.cli("cancel", waiting);
      expect(cancelled.code, cancelled.stderr).toBe(0);
      const ended = await ex.follow(waiting).result();
      expect(ended.code, ended.stderr).toBe(1);
      expect(ended.stdout.trimEnd()).toMatch(/run\.cancelled +CANCELLED/);
    },
    TEST_MS,
  );
});
