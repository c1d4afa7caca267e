/**
 * Case f (FAULT-PLAN 10): an external worker's report arrives at the instant its lease expires,
 * while the engine's timer for that expiry fires: many loops on each store, in process, with the
 * ManualClock. The clock moves to the expiry ±1 ms and the report is sent before or after the
 * move (seeded). Each time the report is either accepted (the visit SUCCEEDED at that attempt,
 * never re-queued) or refused with a conflict and the attempt re-queued (`lease_expired`), never
 * both and never neither; before the expiry it is always accepted.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConflictError, createEngine, ManualClock } from "../../src/index.js";
import { computeOracles, readHistory, reportLine } from "./oracles.js";
import { caseRng, faultDir, onCleanup, pgDatabase, pollUntil } from "./setup.js";

const LOOPS = 400;
const LEASE_S = 2;
/** The engine's sweep (its default): an expiry the lease's own timer missed is found by then. */
const SWEEP_MS = 1000;

describe.each(["sqlite", "postgres"])("f on %s", (store) => {
  it(`f: a report at the instant of lease expiry, ${LOOPS} loops`, async () => {
    const rng = caseRng();
    const database = store === "sqlite" ? `sqlite:${join(faultDir(), "skein.db")}` : pgDatabase().url;
    const clock = new ManualClock();
    const engine = await createEngine({ database, clock, sweepIntervalMs: SWEEP_MS });
    onCleanup(() => engine.close({ timeoutMs: 100 }));
    await engine.registerWorkflow({
      id: "fault-lease",
      defaults: { retry_count: 5, retry_interval: 1, timeout: 3600 },
      nodes: [{ node_id: "t", agent_type: "ext" }],
    });
    let accepted = 0;
    let requeued = 0;
    let both = 0;
    let neither = 0;
    let early = 0;
    const runs: string[] = [];
    const notes: string[] = [];
    // Many wrong outcomes stop the loops early: the case has failed, and its time is bounded.
    for (let i = 0; i < LOOPS && both + neither + early < 10; i++) {
      const run = await engine.startRun("fault-lease", { input: { i } });
      runs.push(run.run_id);
      const [task] = await engine.claimTasks({ agent_types: ["ext"], worker_id: "w", lease_seconds: LEASE_S });
      if (!task) throw new Error(`loop ${i}: nothing to claim`);
      const delta = rng.pick([-1, 0, 0, 1]);
      // The claim's worker_id goes with the report: a task is bound to its holder (DESIGN §13).
      const request = { worker_id: "w", attempt: task.attempt, output: { i } };
      const report = () => engine.completeTask(task.execution_id, request);
      const move = () => clock.advance(LEASE_S * 1000 + delta);
      // Three ways to meet the expiry (seeded): the report sent just before the clock moves, just
      // after it starts moving, or once the clock is there (the expiry's flush may still run).
      const mode = rng.int(0, 2);
      let answer: PromiseSettledResult<{ status: string }>;
      if (mode === 2) {
        await move();
        [answer] = await Promise.allSettled([report()]);
      } else {
        const results = await Promise.allSettled(mode === 0 ? [report(), move()] : [move(), report()]);
        answer = results[mode === 0 ? 0 : 1] as PromiseSettledResult<{ status: string }>;
      }
      // Wait (bounded: T_max is the lease plus one sweep) for the expiry or the success to commit.
      const outcome = async () => {
        const events = await engine.listEvents(run.run_id);
        const succeeded = events.some((e) => e.type === "node.succeeded");
        const expired = events.some(
          (e) =>
            e.type === "node.retrying" && (e.data as { error?: { reason?: string } }).error?.reason === "lease_expired",
        );
        return { succeeded, expired };
      };
      const { succeeded, expired } = await pollUntil(`loop ${i}: an outcome`, 2_000, async () => {
        await clock.advance(50); // time goes on: within a sweep interval the expiry must be applied
        const o = await outcome();
        return o.succeeded || o.expired ? o : undefined;
      }).catch(() => outcome());
      const ok = answer.status === "fulfilled" && answer.value.status === "accepted";
      if (!ok && !(answer.status === "rejected" && answer.reason instanceof ConflictError)) {
        throw new Error(`loop ${i}: the report got neither an answer nor a conflict: ${String(answer)}`);
      }
      if (ok && succeeded && !expired) accepted += 1;
      else if (!ok && expired && !succeeded) requeued += 1;
      else if ((ok || succeeded) && expired) both += 1;
      else {
        neither += 1;
        const v = (await engine.getRun(run.run_id)).nodes[0];
        notes.push(
          `loop ${i} (mode ${mode}, delta ${delta}, ${ok ? "accepted" : "refused"}): ${v?.state} attempt ${v?.attempt}, lease ${(v?.lease_expires_at ?? 0) - clock.now()} ms from now`,
        );
      }
      if (delta < 0 && !ok) early += 1;
      if (!ok) await engine.cancelRun(run.run_id).catch(() => {}); // the re-queued attempt is not needed
    }
    const history = await readHistory(database);
    const oracles = computeOracles(history, [], []);
    const figures = { ...oracles, runs: LOOPS, lost: neither + early, stale: oracles.stale + both };
    reportLine(
      `f lease-edge (${store})`,
      figures,
      rng.seed,
      `${accepted} accepted, ${requeued} re-queued, ${both} both, ${neither} neither, ${early} refused before expiry`,
    );
    expect({ both, neither, early }, notes.join("\n")).toEqual({ both: 0, neither: 0, early: 0 });
    expect(oracles.problems).toEqual([]);
    expect(accepted + requeued).toBe(LOOPS);
    expect(accepted).toBeGreaterThan(0);
    expect(requeued).toBeGreaterThan(0);
  }, 40_000);
});
