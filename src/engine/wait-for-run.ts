/**
 * `waitForRun`: resolves once a run has ended, told by this engine's events and, on a store
 * other engines share, by polling at the sweep interval (another engine may end it).
 */

import type { Clock } from "../clock.js";
import type { RunStatus } from "../core/states.js";
import type { LiveEvent } from "../core/types.js";
import { NotFoundError } from "../errors.js";
import type { Store } from "../store/store.js";

const FINAL: ReadonlySet<RunStatus> = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);

export interface WaitContext<R> {
  store: Store;
  clock: Clock;
  pollMs: number;
  /** Polling stops once the engine is closed. */
  closed: () => boolean;
  subscribe: (listener: (e: LiveEvent) => void, runId: string) => () => void;
  /** What to resolve with once the run ended (the run with its nodes). */
  read: (runId: string) => Promise<R>;
}

export function waitForRun<R>(c: WaitContext<R>, runId: string): Promise<R> {
  return new Promise<R>((resolve, reject) => {
    let settled = false;
    let poll: ReturnType<Clock["setTimeout"]> | null = null;
    const finish = () => {
      if (settled) return;
      settled = true;
      unsubscribe();
      if (poll) c.clock.clearTimeout(poll);
      c.read(runId).then(resolve, reject);
    };
    const check = () => {
      poll = null;
      if (settled || c.closed()) return;
      c.store.getRun(runId).then((run) => {
        if (run && FINAL.has(run.status)) finish();
        else if (!settled) poll = c.clock.setTimeout(check, c.pollMs);
      }, reject);
    };
    if (!c.store.exclusive) poll = c.clock.setTimeout(check, c.pollMs);
    const unsubscribe = c.subscribe((e) => {
      if (e.type === "run.succeeded" || e.type === "run.failed" || e.type === "run.cancelled") finish();
    }, runId);
    c.store.getRun(runId).then((run) => {
      if (!run) {
        settled = true;
        unsubscribe();
        reject(new NotFoundError(`run ${runId} does not exist`));
      } else if (FINAL.has(run.status)) finish();
    }, reject);
  });
}
