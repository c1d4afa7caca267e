/**
 * DESIGN §6 as a property of the pure core: whatever order results arrive in, and however they
 * are grouped into transactions (several results applied before the engine plans compensation,
 * as one group commit does), a run never takes a final status while compensation it planned has
 * not run, and every compensated step has its row.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  advanceCompensation,
  claimableCompensation,
  claimCompensation,
  compensationFailed,
  compensationSucceeded,
  planCompensation,
} from "../../src/core/compensation.js";
import {
  claim,
  emptyChanges,
  failAttempt,
  type RunState,
  releaseCancelled,
  startRunState,
  succeed,
} from "../../src/core/scheduler.js";
import { isTerminal } from "../../src/core/states.js";
import type { Visit } from "../../src/core/types.js";
import { graphOf, makeRun } from "./helpers.js";

const undo = { agent_type: "undo" };
/** reserve, then three parallel steps (two undoable), then a join. */
const GRAPH = graphOf(
  [
    { node_id: "reserve", compensation: undo },
    { node_id: "a", depends_on: ["reserve"], compensation: undo },
    { node_id: "b", depends_on: ["reserve"], compensation: undo },
    { node_id: "c", depends_on: ["reserve"] },
    { node_id: "join", depends_on: ["a", "b", "c"] },
  ],
  { defaults: { retry_count: 1, retry_interval: 1, timeout: 5 } },
);

type Outcome = "success" | "failure" | "retryable";
const FINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);

/**
 * Drives one run to its end. Each step is one transaction: claim what is ready, then apply the
 * results `picks` chooses (1 to 3 of the attempts in flight, late results of cancelled ones
 * included) the way the engine's flush does, then plan compensation as the flush's write does.
 */
function drive(picks: number[]): RunState {
  let now = 1_000;
  const rs = startRunState(makeRun(), GRAPH, now);
  let successSeq = 0;
  const seqOf = new Map<Visit, number>();
  let pick = 0;
  const next = (n: number) => (picks[pick++ % picks.length] ?? 0) % n;
  for (let step = 0; step < 200 && !FINAL.has(rs.run.status); step++) {
    for (const v of rs.current.values()) {
      if ((v.state === "PENDING" || v.state === "RETRYING") && v.ready_at !== null && v.ready_at <= now) {
        claim(rs, v, "e1", now);
      }
    }
    const row = claimableCompensation(rs, now);
    if (row) claimCompensation(rs, row, "e1", now);
    // What may report in this transaction: running attempts, cancelled ones still held, running rows.
    const inFlight = [
      ...[...rs.current.values()].filter((v) => v.state === "RUNNING" || (v.state === "CANCELLED" && v.holder)),
      ...rs.compensations.filter((c) => c.state === "RUNNING"),
    ];
    const count = inFlight.length === 0 ? 0 : 1 + next(3);
    for (let i = 0; i < count && inFlight.length > 0; i++) {
      const [target] = inFlight.splice(next(inFlight.length), 1);
      const outcome = (["success", "failure", "retryable"] as Outcome[])[next(3)] as Outcome;
      const error = { message: "boom", reason: "error" };
      if (target && "seq" in target) {
        if (outcome === "success") compensationSucceeded(rs, target, {}, now);
        else compensationFailed(rs, target, error, outcome === "retryable", now, () => 0);
      } else if (target?.state === "RUNNING") {
        if (outcome === "success") {
          succeed(rs, target, {}, { kind: "targets", targets: [] }, now);
          seqOf.set(target, ++successSeq);
        } else failAttempt(rs, target, error, outcome === "retryable", now, () => 0);
      } else if (target) {
        // A cancelled attempt's late result is fenced and releases it (Flush.withAttempt).
        releaseCancelled(rs, target);
        advanceCompensation(rs, now);
      }
    }
    const history = [...rs.current.values()].map((visit) => ({ visit, successSeq: seqOf.get(visit) ?? null }));
    planCompensation(rs, history, now);
    checkInvariant(rs);
    rs.changes = emptyChanges();
    now += 1_000;
  }
  return rs;
}

function checkInvariant(rs: RunState): void {
  if (!FINAL.has(rs.run.status)) return;
  expect(rs.changes.plan).toBeNull();
  for (const c of rs.compensations) expect(isTerminal(c.state), `${c.execution_id} is ${c.state}`).toBe(true);
  if (rs.run.end_cause === "failed") {
    // Every undoable step that succeeded has its row.
    for (const v of rs.current.values()) {
      if (v.state === "SUCCEEDED" && GRAPH.nodes.get(v.node_id)?.def.compensation) {
        expect(rs.compensations.some((c) => c.node_id === v.node_id && c.visit === v.visit)).toBe(true);
      }
    }
  }
}

describe("compensation, whatever the grouping of results", () => {
  it("property: no run ends while compensation it planned has not run", () => {
    fc.assert(
      fc.property(fc.array(fc.nat(1_000), { minLength: 1, maxLength: 60 }), (picks) => {
        const rs = drive(picks);
        expect(FINAL.has(rs.run.status), `run is ${rs.run.status}`).toBe(true);
        checkInvariant({ ...rs, changes: { ...rs.changes, plan: null } });
      }),
      { numRuns: 500 },
    );
  });
});
