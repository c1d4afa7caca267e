import { describe, expect, it } from "vitest";
import {
  attemptOf,
  expiry,
  fenceReason,
  holds,
  isClaimable,
  notHeldBy,
  parseExecutionId,
  sameReport,
} from "../../src/core/attempt.js";
import { assigneeRefusal, cancelRefusal, retryRefusal, reviewRoundRefusal } from "../../src/core/preconditions.js";
import { beginVisit, claim, currentVisit, holdDue, startRunState } from "../../src/core/scheduler.js";
import { kindOf } from "../../src/definition/kinds/index.js";
import { ConflictError, ForbiddenError, NotFoundError } from "../../src/errors.js";
import { graphOf, makeRun, visit } from "./helpers.js";

const T0 = 1_000;
const boom = { message: "boom", reason: "error" };

function running() {
  const rs = startRunState(makeRun(), graphOf([{ node_id: "a", timeout: 10 }]), T0);
  const v = currentVisit(rs, "a");
  v.payload = {};
  claim(rs, v, "engine-1", T0);
  return { rs, v };
}

describe("one attempt lifecycle (core/attempt.ts)", () => {
  it("parses execution ids of visits and finds the attempt of a visit or a compensation row", () => {
    expect(parseExecutionId("run:with:colons:node:3")).toEqual({
      run_id: "run:with:colons",
      node_id: "node",
      visit: 3,
    });
    expect(parseExecutionId("run:node:0")).toBeNull();
    expect(parseExecutionId("nocolon")).toBeNull();
    const { rs, v } = running();
    expect(attemptOf(rs, v.execution_id)).toMatchObject({ kind: "visit", row: v, current: true });
    expect(attemptOf(rs, `${v.execution_id}:compensate`)).toBeUndefined(); // no compensation row yet
    expect(attemptOf(rs, "other-run:a:1")).toBeUndefined();
  });

  it("fences a result unless its sender holds the current, RUNNING attempt", () => {
    const { rs, v } = running();
    const a = attemptOf(rs, v.execution_id);
    if (!a) throw new Error("no attempt");
    expect(holds(a, 1)).toBe(true);
    expect(holds(a, 2)).toBe(false);
    expect(fenceReason(a, 2)).toBe("stale_attempt");
    expect(fenceReason(undefined, 1)).toBe("superseded");
    a.fail(boom, false, T0 + 1, () => 0);
    expect(holds(a, 1)).toBe(false);
    expect(fenceReason(a, 1)).toBe("visit is FAILED");
  });

  it("a heartbeat renews the lease, never past the deadline; expiry says timeout or lease_expired", () => {
    const { rs, v } = running();
    const a = attemptOf(rs, v.execution_id);
    expect(v.deadline_at).toBe(T0 + 10_000);
    a?.renew(T0 + 5_000);
    expect(v.lease_expires_at).toBe(T0 + 10_000);
    expect(expiry(v, 10, T0 + 9_999)).toBeNull();
    expect(expiry(v, 10, T0 + 10_000)).toEqual({
      error: { message: "attempt 1 timed out after 10 s", reason: "timeout" },
      abort: "timeout",
    });
    expect(expiry({ ...v, lease_expires_at: T0 + 100 }, 10, T0 + 100)?.abort).toBe("lease_expired");
    expect(expiry({ ...v, state: "IN_REVIEW" }, 10, T0 + 20_000)).toBeNull();
  });

  it("claimable means current, PENDING or RETRYING, due, and resolved", () => {
    const ready = visit("a", "PENDING", { ready_at: T0, payload: {} });
    expect(isClaimable(ready, T0)).toBe(true);
    expect(isClaimable(ready, T0 - 1)).toBe(false);
    expect(isClaimable({ ...ready, payload: null }, T0)).toBe(false);
    expect(isClaimable({ ...ready, is_current: false }, T0)).toBe(false);
    expect(isClaimable({ ...ready, state: "WAITING" }, T0)).toBe(false);
    expect(isClaimable({ ...ready, state: "RETRYING" }, T0)).toBe(true);
  });

  it("recognises the same report sent again, and says who holds an attempt without naming it", () => {
    const done = visit("a", "SUCCEEDED", { output: { n: 1 } });
    expect(sameReport(done, { kind: "success", output: { n: 1 } })).toBe(true);
    expect(sameReport(done, { kind: "success", output: { n: 2 } })).toBe(false);
    expect(sameReport(visit("a", "RETRYING", { error: boom }), { kind: "failure", error: boom })).toBe(true);
    expect(sameReport(done, { kind: "heartbeat" })).toBe(false);
    expect(notHeldBy("r:a:1", 1, "worker:t/w")).toContain("another worker claimed it");
    expect(notHeldBy("r:a:1", 1, "engine-1")).toContain("an engine runs it in process");
  });
});

describe("preconditions (core/preconditions.ts)", () => {
  it("a cancel needs a run that has not ended", () => {
    expect(cancelRefusal(makeRun())).toBeNull();
    const refused = cancelRefusal(makeRun({ ended_at: 5, status: "SUCCEEDED" }));
    expect(refused).toBeInstanceOf(ConflictError);
    expect(refused?.message).toBe("run run1 already ended SUCCEEDED; nothing to cancel");
    expect(cancelRefusal(makeRun({ ended_at: 5, status: "COMPENSATING" }))?.message).toContain("is compensating");
  });

  it("a redrive needs a FAILED or CANCELLED run, force when it needs attention, and a known node", () => {
    const has = (id: string) => id === "a";
    const opts = { from: null, force: false };
    expect(retryRefusal(makeRun({ status: "RUNNING" }), opts, has)).toBeInstanceOf(ConflictError);
    expect(retryRefusal(makeRun({ status: "FAILED" }), opts, has)).toBeNull();
    expect(retryRefusal(makeRun({ status: "FAILED", needs_attention: true }), opts, has)?.message).toContain(
      "retry with force",
    );
    expect(
      retryRefusal(makeRun({ status: "FAILED", needs_attention: true }), { from: null, force: true }, has),
    ).toBeNull();
    expect(retryRefusal(makeRun({ status: "CANCELLED" }), { from: "zz", force: false }, has)).toBeInstanceOf(
      NotFoundError,
    );
  });

  it("a decision needs the round it names, by an assignee", () => {
    const v = visit("check", "IN_REVIEW");
    expect(reviewRoundRefusal(v, "run1", undefined)).toBeNull();
    expect(reviewRoundRefusal(v, "run1", "other")?.message).toContain(`its current round is ${v.execution_id}`);
    expect(reviewRoundRefusal(visit("check", "SUCCEEDED"), "run1", undefined)?.message).toContain("it is SUCCEEDED");
    const d = { decision: "approve" as const, by: "ann", admin: null, comment: null, output: null };
    expect(assigneeRefusal("check", ["ann"], d)).toBeNull();
    expect(assigneeRefusal("check", undefined, d)).toBeNull();
    expect(assigneeRefusal("check", ["bob"], d)).toBeInstanceOf(ForbiddenError);
    expect(assigneeRefusal("check", "ann", d)?.message).toContain("not a list of names");
  });
});

describe("node kinds (core/kinds)", () => {
  it("every agent_type has a kind: built-ins by name, any other is a task", () => {
    expect(kindOf("human_review")).toMatchObject({ name: "human_review", start: "engine", retries: false });
    expect(kindOf("sleep")).toMatchObject({ name: "sleep", start: "engine", retries: false });
    expect(kindOf("aggregator")).toMatchObject({ name: "aggregator", start: "agent" });
    expect(kindOf("my_agent")).toMatchObject({ name: "task", start: "agent", retries: true });
  });

  it("a sleep waits from the transaction's time and wakes with slept_until", async () => {
    const rs = startRunState(
      makeRun(),
      graphOf([{ node_id: "nap", agent_type: "sleep", payload: { seconds: 60 } }]),
      T0,
    );
    const v = currentVisit(rs, "nap");
    const noInbox = { waitingEvents: async () => [], keyedEvents: async () => [] };
    await beginVisit(rs, v, T0 + 5, noInbox);
    expect(v).toMatchObject({ state: "WAITING", lease_expires_at: T0 + 5 + 60_000, holder: null });
    holdDue(rs, v, T0 + 5 + 60_000);
    expect(v).toMatchObject({ state: "SUCCEEDED", output: { slept_until: new Date(T0 + 5 + 60_000).toISOString() } });
    expect(rs.run.ended_at).toBe(T0 + 5 + 60_000);
  });
});
