/**
 * Case g (FAULT-PLAN 19): an approval arrives at the review's timeout ±1 ms, many loops on each
 * store, in process, with the ManualClock; the approval is sent before the clock moves, while it
 * moves, or once it is there (seeded). Exactly one of approved (SUCCEEDED) or `review_timeout`
 * (FAILED) wins; the loser gets a conflict; before the timeout the approval always wins.
 * "Once it is there" means once the engine has acted on every timer up to that time (advanceTo):
 * on PostgreSQL a flush's I/O outlasts the clock's move, so without it the approval races the
 * sweep in every mode, and the timeout would be tried only by chance.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConflictError, createEngine, ManualClock } from "../../src/index.js";
import { advanceTo } from "../engine/schedule-clock.js";
import { computeOracles, readHistory, reportLine } from "./oracles.js";
import { caseRng, faultDir, onCleanup, pgDatabase, pollUntil } from "./setup.js";

const LOOPS = 200;
const TIMEOUT_S = 5;

describe.each(["sqlite", "postgres"])("g on %s", (store) => {
  it(`g: approve at the review timeout, ${LOOPS} loops`, async () => {
    const rng = caseRng();
    const database = store === "sqlite" ? `sqlite:${join(faultDir(), "skein.db")}` : pgDatabase().url;
    const clock = new ManualClock();
    const engine = await createEngine({ database, clock });
    onCleanup(() => engine.close({ timeoutMs: 100 }));
    await engine.registerWorkflow({
      id: "fault-review",
      nodes: [{ node_id: "r", agent_type: "human_review", timeout: TIMEOUT_S, payload: { title: "ok?" } }],
    });
    let approved = 0;
    let timedOut = 0;
    let both = 0;
    let neither = 0;
    let early = 0;
    const notes: string[] = [];
    // Many wrong outcomes stop the loops early: the case has failed, and its time is bounded.
    for (let i = 0; i < LOOPS && both + neither + early < 10; i++) {
      const run = await engine.startRun("fault-review", { input: { i } });
      const visit = await pollUntil(`loop ${i}: the review`, 2_000, async () =>
        (await engine.getRun(run.run_id)).nodes.find((n) => n.state === "IN_REVIEW"),
      );
      const delta = rng.pick([-1, 0, 0, 1]);
      const wait = (visit.deadline_at ?? 0) - clock.now() + delta;
      const approve = () => engine.review(run.run_id, "r", { decision: "approve", by: "ann" });
      const move = () => clock.advance(wait);
      const mode = rng.int(0, 2);
      let answer: PromiseSettledResult<unknown>;
      if (mode === 2) {
        await advanceTo(engine, clock, clock.now() + wait);
        [answer] = await Promise.allSettled([approve()]);
      } else {
        const results = await Promise.allSettled(mode === 0 ? [approve(), move()] : [move(), approve()]);
        answer = results[mode === 0 ? 0 : 1] as PromiseSettledResult<unknown>;
      }
      if (answer.status === "rejected" && !(answer.reason instanceof ConflictError)) {
        throw new Error(`loop ${i}: the approval failed with ${String(answer.reason)}`);
      }
      // T_max: the timeout plus one sweep (the review's expiry is due by then).
      const done = await pollUntil(`loop ${i}: the run's end`, 2_000, async () => {
        await clock.advance(50);
        const r = await engine.getRun(run.run_id);
        return r.status === "RUNNING" ? undefined : r;
      }).catch(() => engine.getRun(run.run_id));
      const ok = answer.status === "fulfilled";
      const won = done.status === "SUCCEEDED" ? "approved" : done.error?.reason === "review_timeout" ? "timeout" : null;
      if (ok && won === "approved") approved += 1;
      else if (!ok && won === "timeout") timedOut += 1;
      else if (won !== null) {
        both += 1; // the approval was answered yes and the review timed out, or refused and it won
        notes.push(`loop ${i} (mode ${mode}, delta ${delta}): approval ${answer.status}, run ${done.status}`);
      } else {
        neither += 1;
        notes.push(`loop ${i} (mode ${mode}, delta ${delta}): approval ${answer.status}, run ${done.status}`);
      }
      if (delta < 0 && mode === 2 && !ok) early += 1;
    }
    const history = await readHistory(database);
    const oracles = computeOracles(history, [], []);
    const decided = history.events.filter((e) => e.type === "review.decided").length;
    const figures = { ...oracles, runs: LOOPS, lost: neither + early, stale: oracles.stale + both };
    reportLine(
      `g review-timeout (${store})`,
      figures,
      rng.seed,
      `${approved} approved, ${timedOut} timed out, ${both} both, ${neither} neither, ${early} refused before the timeout`,
    );
    expect({ both, neither, early }, notes.join("\n")).toEqual({ both: 0, neither: 0, early: 0 });
    expect(oracles.problems).toEqual([]);
    expect(decided).toBe(approved);
    expect(approved + timedOut).toBe(LOOPS);
    expect(approved).toBeGreaterThan(0);
    expect(timedOut).toBeGreaterThan(0);
  }, 40_000);
});
