/**
 * Following a run that this process's engine runs (`skein run`, `skein resume`): the live view
 * while it runs, then the report (or the run as JSON) and the exit code. SIGINT or SIGTERM stops
 * the engine gracefully and prints how to resume.
 */
import type { Engine, RunEvent } from "../index.js";
import { type LiveView, lineView, RunProgress, tableView } from "./live-view.js";
import { EXIT, exitCodeForStatus, printJson, println } from "./output.js";
import { keepAlive, stopSignal } from "./signals.js";
import { runReport } from "./summary.js";

/**
 * Listens to every event of an engine from the moment it is created, and hands one run's events
 * (those published before its id was known included) to a listener: nothing between
 * `startRun` and the live view is lost.
 */
export class EventTap {
  private readonly buffer: RunEvent[] = [];
  private runId: string | null = null;
  private listener: ((e: RunEvent) => void) | null = null;
  private readonly unsubscribe: () => void;

  constructor(engine: Engine) {
    this.unsubscribe = engine.subscribe((e) => {
      if (this.runId === null) this.buffer.push(e);
      else if (e.run_id === this.runId) this.listener?.(e);
    });
  }

  follow(runId: string, listener: (e: RunEvent) => void): void {
    this.runId = runId;
    this.listener = listener;
    for (const e of this.buffer.splice(0)) if (e.run_id === runId) listener(e);
  }

  close(): void {
    this.unsubscribe();
  }
}

export interface FollowOptions {
  /** No live view; the run as one JSON object at the end. */
  json: boolean;
  /** The command line that resumes the run, printed when stopped by a signal. */
  resume: string;
}

/** Follows the run to its end; returns the exit code (0 SUCCEEDED, 1 FAILED or CANCELLED, 130 stopped). */
export async function follow(engine: Engine, tap: EventTap, runId: string, options: FollowOptions): Promise<number> {
  const release = keepAlive();
  const stop = stopSignal();
  let view: LiveView | null = null;
  try {
    const run = await engine.getRun(runId);
    if (!options.json) {
      view = process.stdout.isTTY
        ? tableView(process.stdout, new RunProgress(run))
        : lineView((text) => process.stdout.write(text), run.created_at);
    }
    const live = view;
    tap.follow(runId, (e) => live?.event(e));
    const outcome = await Promise.race([
      engine.waitForRun(runId).then((done) => ({ done })),
      stop.received.then((signal) => ({ signal })),
    ]);
    view?.stop();
    view = null;
    if ("signal" in outcome) {
      process.stderr.write(`skein: ${outcome.signal}: stopping the engine (attempts in flight may finish)...\n`);
      await engine.close();
      process.stderr.write(`skein: run ${runId} is not finished; resume it with:\n  ${options.resume}\n`);
      return EXIT.interrupted;
    }
    const done = outcome.done;
    if (options.json) printJson(done);
    else println(`\n${runReport(done, await engine.listVisits(runId))}`);
    return exitCodeForStatus(done.status);
  } finally {
    view?.stop();
    tap.close();
    stop.dispose();
    release();
  }
}
