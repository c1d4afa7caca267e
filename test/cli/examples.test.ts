/**
 * One example end to end with the built `skein` CLI: `skein run` in one process, `skein review`
 * in another. Every example's behaviour is tested on createTestEngine() in test/examples/.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, requireBuiltCli, Skein, skein, until, workspace } from "./helpers.js";

requireBuiltCli();

const example = (name: string) => [
  join(ROOT, "examples", name, "workflow.json"),
  "--agents",
  join(ROOT, "examples", name, "agents.ts"),
];

describe("examples", () => {
  it("order-approval: reserves and charges, waits for a person's approval (skein review elsewhere), then ships", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    const input = { order_id: "A-1", sku: "SKU-9", quantity: 2, amount: 49.5 };
    const running = new Skein(["run", ...example("order-approval"), "--input", JSON.stringify(input), ...db], ws.dir);
    const runId = (await running.waitFor(/^run (\S+) started$/m))[1] as string;
    await running.waitFor(/review\.requested approval#1 waiting for ops-lead or finance: Approve order A-1/);
    await until(
      "skein reviews lists the approval",
      async () => (await skein(["reviews", ...db], ws.dir)).stdout,
      (text) => text.includes(runId),
    );
    const approved = await skein(["review", runId, "approval", "approve", "--by", "ops-lead", ...db], ws.dir);
    expect(approved.code, approved.stderr).toBe(0);
    const r = await running.result();
    expect(r.code, r.stderr).toBe(0);
    // The decision, written by another process, shows in the live lines, in order.
    expect(r.stdout).toMatch(/review\.decided +approval#1 approve by ops-lead\n.*node\.succeeded +approval#1/s);
    expect(r.stdout).toMatch(/^ +\d+ ms {2}run\.succeeded +SUCCEEDED$/m);
    expect(r.stdout).toMatch(/^ship +SUCCEEDED +1 +1 +0 /m);
    expect(r.stderr).toMatch(/reserve_stock#1: reserved 2 x SKU-9 \(res-[0-9a-f]{10}\)/);
  });
});
