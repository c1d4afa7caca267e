/** `human_review`'s states: IN_REVIEW until a decision (approve, reject) or its timeout. */
import { describe, expect, it } from "vitest";
import { decideReview } from "../../../src/core/scheduler.js";
import { begin, cur, due, engineStarts, events, fresh, lastEvent, start, T0 } from "./helpers.js";

const nodes = [
  {
    node_id: "check",
    agent_type: "human_review",
    timeout: 3600,
    payload: { title: "Publish?", assignees: ["editor"], text: "draft" },
    next_on_success: "publish",
    next_on_failure: "fix",
  },
  { node_id: "publish" },
  { node_id: "fix" },
];

const decision = (d: "approve" | "reject", comment: string | null = null) => ({
  decision: d,
  by: "editor",
  admin: null,
  comment,
  output: d === "approve" ? { edited: true } : null,
});

describe("human_review", async () => {
  it("is started by the engine, not claimed by an agent", async () => {
    expect(engineStarts(start(nodes), "check")).toBe(true);
  });

  it("waits IN_REVIEW until its timeout, asking with its payload", async () => {
    const rs = fresh(start(nodes));
    const v = await begin(rs, "check", T0);
    const deadline = T0 + 3_600_000;
    expect(v).toMatchObject({ state: "IN_REVIEW", attempt: 1, deadline_at: deadline, lease_expires_at: deadline });
    expect(events(rs)).toEqual(["review.requested:check"]);
    expect(lastEvent(rs, "review.requested")).toEqual({
      execution_id: v.execution_id,
      title: "Publish?",
      instructions: null,
      assignees: ["editor"],
      data: { title: "Publish?", assignees: ["editor"], text: "draft" },
      deadline_at: deadline,
    });
  });

  it("an approval succeeds it with the decision and fires its success edges", async () => {
    const rs = start(nodes);
    const v = await begin(rs, "check", T0);
    fresh(rs);
    decideReview(rs, v, decision("approve", "fine"), { kind: "targets", targets: ["publish"] }, T0 + 10);
    expect(v.state).toBe("SUCCEEDED");
    expect(v.output).toEqual({ decision: "approve", by: "editor", comment: "fine", output: { edited: true } });
    expect(events(rs)).toEqual([
      "review.decided:check",
      "node.succeeded:check",
      "node.ready:publish",
      "node.skipped:fix",
    ]);
  });

  it("a rejection fails it as rejected, routed by next_on_failure", async () => {
    const rs = start(nodes);
    const v = await begin(rs, "check", T0);
    decideReview(rs, v, decision("reject", "typos"), { kind: "targets", targets: [] }, T0 + 10);
    expect(v).toMatchObject({ state: "FAILED", reason: "rejected", error: { message: "rejected by editor: typos" } });
    expect(cur(rs, "fix").ready_at).toBe(T0 + 10);
    expect(cur(rs, "publish").ready_at).toBeNull();
  });

  it("its timeout passing fails it review_timeout, routed by next_on_failure", async () => {
    const rs = start(nodes);
    await begin(rs, "check", T0);
    const v = due(rs, "check", T0 + 3_600_000);
    expect(v).toMatchObject({
      state: "FAILED",
      reason: "review_timeout",
      error: { message: "no decision within 3600 s", reason: "review_timeout" },
    });
    expect(cur(rs, "fix").ready_at).toBe(T0 + 3_600_000);
  });

  it("without a timeout of its own, waits the workflow's", async () => {
    const rs = start([{ node_id: "check", agent_type: "human_review" }], { timeout: 600 });
    expect((await begin(rs, "check", T0)).deadline_at).toBe(T0 + 600_000);
  });
});
