/**
 * Driving an engine through schedule slots on a manual clock (both stores): the clock moves to
 * each timer the engine armed (its wake-up at the next slot) and waits, turn by turn of the event
 * loop, until the engine has nothing left to do at that time. No sleeping: the engine's own
 * activity says when it is idle.
 */
import type { Engine, ManualClock } from "../../src/index.js";

/** One turn of the event loop: the engine's immediates and I/O callbacks run. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Attempts a test holds on purpose (a hung agent): their execution ids. Other in-flight
 * attempts are the engine's work, waited for.
 */
export type Hung = ReadonlySet<string>;

/** Until no flush is queued or running and every attempt in flight is a hung one. */
export async function idle(engine: Engine, hung: Hung = new Set()): Promise<void> {
  for (let quiet = 0; quiet < 2; ) {
    await turn();
    const { working, held } = engine.activity();
    quiet = working || held.some((h) => !hung.has(h.execution_id)) ? 0 : quiet + 1;
  }
}

/** Moves the clock to `target`, stopping at every timer on the way for the engine to act. */
export async function advanceTo(engine: Engine, clock: ManualClock, target: number, hung?: Hung): Promise<void> {
  await idle(engine, hung);
  for (;;) {
    const timer = clock.nextTimerAt();
    if (timer === null || timer > target) break;
    await clock.advance(Math.max(0, timer - clock.now()));
    await idle(engine, hung);
  }
  await clock.advance(Math.max(0, target - clock.now()));
  await idle(engine, hung);
}
