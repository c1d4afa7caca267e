/**
 * W5, the parent's side: a system's process with 100 DAG8 runs in flight (50 ms steps, each
 * appending its side effect to a file) SIGKILLs itself once half of their steps have appended,
 * then a new process of the same system restarts on the same database (child.ts w5-start,
 * w5-resume). Measured from the restart's spawn (lib.ts wallNow, shared by the processes): the
 * first step started by the new process, and every run done. Before resuming, the new process
 * reads which steps the database holds as done: each of those must have appended its effect
 * exactly once (a completed step that ran twice is a doubled effect); a step that was in flight
 * may append again (at least once, as every system here promises).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BenchChild, type Message } from "../children.js";
import { progress, wallNow, within } from "../lib.js";
import { PEERS_DAG8 } from "./shapes.js";
import type { ChildConfig } from "./systems/system.js";

/** Runs in flight at the kill. */
export const W5_RUNS = 100;
/** How long each W5 step takes: the kill finds steps in flight, not only between them. */
export const W5_STEP_MS = 50;

export interface W5Result {
  first_resumed_ms: number | null;
  /** The same from the moment the restarted process opens the system (its start-up excluded). */
  first_resumed_after_open_ms: number | null;
  all_done_ms: number | null;
  runs_done: number;
  /** Steps the database held as done at the kill that appended their effect again. */
  doubled: number;
  /** Steps in flight at the kill (effect appended, not recorded) that ran again: allowed. */
  rerun_in_flight: number;
  /** Steps done at the kill, as the database held them. */
  committed_at_kill: number;
  /** Steps of finished runs whose effect never appended (must be 0). */
  missing: number;
}

/**
 * One repetition on the database `config` names (fresh: the caller makes it). `capMs` bounds
 * the restart: a system that has not finished by then is killed and reported as it stood.
 */
export async function w5Once(config: ChildConfig, capMs: number): Promise<W5Result> {
  const dir = mkdtempSync(join(process.env.BENCH_TMPDIR ?? tmpdir(), "skein-peers-w5-"));
  const effectFile = join(dir, "effects.log");
  const withEffects = { ...config, effectFile };
  const first = new BenchChild(`${config.system} (w5, killed)`, "bench/peers/child.ts", [
    "w5-start",
    JSON.stringify(withEffects),
  ]);
  try {
    const { keys } = await first.take<Message & { keys: string[] }>("started", 120_000);
    await within(first.exited, 60_000, `${config.system}: the kill at half the steps`);
    const restartedAt = wallNow();
    const second = new BenchChild(`${config.system} (w5, restarted)`, "bench/peers/child.ts", [
      "w5-resume",
      JSON.stringify({ ...withEffects, keys }),
    ]);
    try {
      const { steps } = await second.take<Message & { steps: string[] }>("committed", 60_000);
      const openedAt = (await second.take<Message & { at: number }>("opening", 60_000)).at;
      let firstAt: number | null = null;
      let doneAt: number | null = null;
      try {
        doneAt = (await second.take<Message & { at: number }>("resumed", capMs - (wallNow() - restartedAt))).at;
      } catch (e) {
        progress(`w5 ${config.system}: ${(e as Error).message}`);
      }
      await second.kill();
      // Printed before "resumed", or before the kill; absent if no step was left to run.
      firstAt = await second.take<Message & { at: number }>("first", 0).then(
        (m) => m.at,
        () => null,
      );
      let runsDone = 0; // the "done" lines it printed before it finished or was killed
      for (;;) {
        try {
          await second.take("done", 0);
          runsDone += 1;
        } catch {
          break;
        }
      }
      const counts = tally(readFileSync(effectFile, "utf8"), new Set(steps), keys, runsDone);
      return {
        first_resumed_ms: firstAt === null ? null : firstAt - restartedAt,
        first_resumed_after_open_ms: firstAt === null ? null : firstAt - openedAt,
        all_done_ms: runsDone === W5_RUNS && doneAt !== null ? doneAt - restartedAt : null,
        ...counts,
      };
    } finally {
      await second.kill();
    }
  } finally {
    await first.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What the effect log says, against the steps the database held as done at the kill. */
function tally(log: string, committed: Set<string>, keys: string[], runsDone: number) {
  const count = new Map<string, number>();
  for (const line of log.split("\n")) if (line) count.set(line, (count.get(line) ?? 0) + 1);
  let doubled = 0;
  let rerun = 0;
  for (const [step, n] of count) {
    if (n > 1 && committed.has(step)) doubled += 1;
    else if (n > 1) rerun += 1;
  }
  let missing = 0;
  if (runsDone === W5_RUNS) {
    for (const key of keys) for (const n of PEERS_DAG8.nodes) if (!count.has(`${key} ${n.node_id}`)) missing += 1;
  }
  return { runs_done: runsDone, doubled, rerun_in_flight: rerun, committed_at_kill: committed.size, missing };
}
