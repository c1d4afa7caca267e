/** examples/order-approval: a person approves (ships), rejects, or lets 12 hours pass (refund and release). */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import agents from "../../examples/order-approval/agents.js";
import { nodeOf, runExample, START } from "./example.js";

const ORDER = { order_id: "A-1", sku: "SKU-9", quantity: 2, amount: 49.5 };
const HOUR = 3_600_000;

/** What the agents log to stderr, kept off the test output and read by the tests. */
let logged: string[] = [];
beforeEach(() => {
  logged = [];
  vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
    logged.push(String(chunk));
    return true;
  });
});
afterEach(() => {
  vi.restoreAllMocks();
});

describe("examples/order-approval", () => {
  it("reserves and charges, waits for the approval without moving the clock, then ships", async () => {
    const t = await runExample("order-approval", agents);
    const run = await t.engine.startRun("order-approval", { input: ORDER });
    await t.runUntilIdle();
    const [review] = await t.engine.listReviews();
    expect(review).toMatchObject({
      node_id: "approval",
      title: "Approve order A-1: 2 x SKU-9",
      assignees: ["ops-lead", "finance"],
    });
    expect(review?.deadline_at).toBe(START + 12 * HOUR);
    expect(t.clock.now()).toBe(START);

    await t.review(run.run_id, "approval", { decision: "approve", by: "ops-lead" });
    const done = await t.result(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(nodeOf(done, "ship").output).toMatchObject({ order_id: "A-1" });
    expect(logged.join("")).toMatch(/ship#1: shipped order A-1 from res-[0-9a-f]{10}, approved by ops-lead/);
  });

  it("a rejection fails the run, which refunds the card, then releases the stock", async () => {
    const t = await runExample("order-approval", agents);
    const run = await t.engine.startRun("order-approval", { input: ORDER });
    await t.review(run.run_id, "approval", { decision: "reject", by: "finance", comment: "fraud check" });
    const done = await t.result(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(done.compensations.map((c) => [c.node_id, c.state])).toEqual([
      ["charge_card", "SUCCEEDED"],
      ["reserve_stock", "SUCCEEDED"],
    ]);
    expect(t.calls().map((c) => c.agent_type)).toEqual([
      "inventory",
      "payments",
      "payments_refund",
      "inventory_release",
    ]);
  });

  it("nobody decides within 12 hours: the review times out and the run refunds and releases", async () => {
    const t = await runExample("order-approval", agents);
    const run = await t.engine.startRun("order-approval", { input: ORDER });
    await t.advance("11h");
    expect((await t.engine.getRun(run.run_id)).status).toBe("RUNNING");
    await t.advance("1h");
    const done = await t.result(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(nodeOf(done, "approval")).toMatchObject({ state: "FAILED", reason: "review_timeout" });
    expect(t.calls("payments_refund")[0]).toMatchObject({ payload: { amount: 49.5 }, at: START + 12 * HOUR });
    expect(t.calls("inventory_release")).toHaveLength(1);
    expect(logged.join("")).toMatch(/refunded 49.5 of charge ch-[0-9a-f]{10}/);
  });
});
