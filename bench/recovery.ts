/**
 * recovery_ms: how long a new engine takes to re-dispatch the attempts a dead engine held.
 * A child process (recovery-child.ts) starts 200 runs whose first node's agent never returns,
 * reports "ready" once all 200 attempts are started, and is SIGKILLed (and reaped, so its pid is
 * gone). Then, in this process, from calling createEngine (whose agents return at once) until the
 * handler has been invoked for all 200 interrupted visits (attempt 2). Each re-dispatch must carry
 * the execution_id the child's handler saw, with a higher attempt; anything else is a failure.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { createEngine } from "../src/index.js";
import { deferred, type Measured, progress, tempDb, within } from "./lib.js";

const RUNS = 200;

export async function benchRecovery(): Promise<Measured> {
  const db = tempDb("recovery");
  try {
    const before = await killedChild(db.path);
    const failures: string[] = [];
    const seen = new Map<string, number>();
    const all = deferred<number>();
    const t0 = performance.now();
    const engine = await createEngine({
      database: db.url,
      maxConcurrency: 1000,
      agents: {
        work: (task) => {
          const now = performance.now();
          if (task.node_id === "first") {
            seen.set(task.execution_id, task.attempt);
            if (seen.size === RUNS) all.resolve(now);
          }
          return { ok: true };
        },
      },
    });
    const engineOpen = performance.now();
    let done: number;
    try {
      done = await within(all.promise, 30_000, `recovery: re-dispatch of ${RUNS} attempts`);
    } finally {
      await engine.close();
    }
    for (const [id, attempt] of before) {
      const again = seen.get(id);
      if (again === undefined) failures.push(`recovery: execution ${id} was not re-dispatched`);
      else if (again !== attempt + 1)
        failures.push(`recovery: ${id} came back as attempt ${again}, not ${attempt + 1}`);
    }
    for (const id of seen.keys()) {
      if (!before.has(id)) failures.push(`recovery: re-dispatched ${id}, an execution_id the dead engine never held`);
    }
    progress(`recovery: ${seen.size} attempts re-dispatched, ${failures.length} problems`);
    return {
      metrics: { recovery_ms: done - t0 },
      meta: { recovery: { runs: RUNS, create_engine_ms: engineOpen - t0, same_execution_ids: failures.length === 0 } },
      failures,
    };
  } finally {
    db.cleanup();
  }
}

/** Runs the child until it reports its attempts in flight, SIGKILLs it, and returns execution_id → attempt. */
async function killedChild(path: string): Promise<Map<string, number>> {
  const child = spawn(process.execPath, ["--import", "tsx", "bench/recovery-child.ts", path, String(RUNS)], {
    stdio: ["pipe", "pipe", "inherit"], // the child exits when our end of its stdin closes
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    const line = await within(readyLine(child), 60_000, "recovery child: 200 attempts in flight");
    const { executions } = JSON.parse(line) as { executions: { execution_id: string; attempt: number }[] };
    child.kill("SIGKILL");
    await exited; // reaped: a zombie's pid would still look alive to the next engine
    return new Map(executions.map((e) => [e.execution_id, e.attempt]));
  } catch (e) {
    child.kill("SIGKILL");
    await exited;
    throw e;
  }
}

function readyLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on("line", (line) => {
      if (line.startsWith('{"ready":true')) resolve(line);
    });
    child.once("exit", (code, signal) => reject(new Error(`recovery child exited early (${code ?? signal})`)));
  });
}
