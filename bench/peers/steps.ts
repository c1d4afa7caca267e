/**
 * What every step of every system does: the one function their step, node, agent or job calls.
 * The child sets, before each command, how long a step takes and what is recorded: when steps
 * start (W1 intervals, W3 "all started", W5 "first resumed step") and, for W5, a side effect
 * appended to a file, which a SIGKILL cannot take back. Times are lib.ts `wallNow` (epoch ms),
 * comparable between the bench's processes.
 */
import { appendFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { wallNow } from "../lib.js";

/** The 200-byte payload: each run's input and each step's output. */
export const PAYLOAD = "p".repeat(200);

export const stepConfig = {
  /** How long a step takes (0: a no-op that returns at once). */
  delayMs: 0,
  /** When set, every step's start is pushed here as [node_id, wallNow()]. */
  starts: null as [string, number][] | null,
  /** When set, each step that finishes appends "<run key> <node_id>\n" to this file (W5). */
  effectFile: null as string | null,
  /** Side effects appended by this process. */
  effects: 0,
  /** Called after each side effect (W5: the child reports when half the steps are done). */
  onEffect: null as (() => void) | null,
  /** Steps running now, and the most that ran at once since the child last reset it (W6). */
  inFlight: 0,
  maxInFlight: 0,
  /** Called once, when the first step of this process starts (W5: the first resumed step). */
  onFirstStart: null as ((at: number) => void) | null,
};

let started = false;

/** One step: `runKey` names the run in the system's own terms (run id, workflow id, thread id). */
export async function work(runKey: string, nodeId: string): Promise<string> {
  const at = wallNow();
  if (!started) {
    started = true;
    stepConfig.onFirstStart?.(at);
  }
  stepConfig.starts?.push([nodeId, at]);
  stepConfig.inFlight += 1;
  stepConfig.maxInFlight = Math.max(stepConfig.maxInFlight, stepConfig.inFlight);
  try {
    if (stepConfig.delayMs > 0) await sleep(stepConfig.delayMs);
  } finally {
    stepConfig.inFlight -= 1;
  }
  if (stepConfig.effectFile) {
    // O_APPEND: one write per effect, whole lines even when steps run concurrently.
    appendFileSync(stepConfig.effectFile, `${runKey} ${nodeId}\n`);
    stepConfig.effects += 1;
    stepConfig.onEffect?.();
  }
  return PAYLOAD;
}

/** W6's plan step: `work`, then the list of `n` items the fan-out maps (200 bytes each). */
export async function plan(runKey: string, n: number): Promise<string[]> {
  await work(runKey, "plan");
  return Array.from({ length: n }, (_, i) => `${String(i).padStart(6, "0")}${PAYLOAD.slice(6)}`);
}
