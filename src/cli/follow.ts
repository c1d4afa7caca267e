/**
 * Following a run that this process's engine runs (`skein run`, `skein resume`): the live view
 * while it runs, then the report (or the run as JSON) and the exit code. SIGINT or SIGTERM stops
 * the engine gracefully and prints how to resume.
 *
 * The view shows the run's stored events in order. This engine's events trigger a read at once;
 * what another process writes to the run (`skein review`, `cancel`, `retry`), which this engine
 * never publishes, is found by a read every second. A map node's items end without an event of
 * the run: the table reads the run every second for their counts. Progress (`node.progress`)
 * goes to the view as this engine publishes it.
 */
import type { Engine, ProgressEvent, RunEvent } from "../index.js";
import { type LiveView, lineView, RunProgress, tableView } from "./live-view.js";
import { EXIT, exitCodeForStatus, printJson, println } from "./output.js";
import { keepAlive, stopSignal } from "./signals.js";
import { StoredEvents } from "./stored-events.js";
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
  private onProgress: ((e: ProgressEvent) => void) | null = null;
  private readonly unsubscribe: () => void;

  constructor(engine: Engine) {
    this.unsubscribe = engine.subscribe((e) => {
      if (e.type === "node.progress") {
        // Live only: what came before the run's id was known is stale, and not kept.
        if (e.run_id === this.runId) this.onProgress?.(e as ProgressEvent);
        return;
      }
      if (this.runId === null) this.buffer.push(e);
      else if (e.run_id === this.runId) this.listener?.(e);
    });
  }

  follow(runId: string, listener: (e: RunEvent) => void, onProgress?: (e: ProgressEvent) => void): void {
    this.runId = runId;
    this.listener = listener;
    this.onProgress = onProgress ?? null;
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
  /** The database the commands shown name (`--db`, when the user gave it). */
  db?: string | undefined;
}

/** How often the stored events are read for what other processes wrote. */
const POLL_MS = 1000;
const PAGE = 1000;

/** Follows the run to its end; returns the exit code (0 SUCCEEDED, 1 FAILED or CANCELLED, 130 stopped). */
export async function follow(engine: Engine, tap: EventTap, runId: string, options: FollowOptions): Promise<number> {
  const release = keepAlive();
  const stop = stopSignal();
  let view: LiveView | null = null;
  let stored: StoredEvents | null = null;
  let stopCounts = () => {};
  try {
    const run = await engine.getRun(runId);
    if (!options.json) {
      const progress = new RunProgress(run, options.db);
      view = process.stdout.isTTY
        ? tableView(process.stdout, progress)
        : lineView((text) => process.stdout.write(text), progress);
      if (process.stdout.isTTY && progress.hasMaps) stopCounts = readMapCounts(engine, progress);
    }
    const live = view;
    // The events this engine published before now (the new run's, or what a resumed run's
    // recovery did) are shown; the history before them is not replayed.
    let firstSeq: number | null = null;
    let ready = false;
    tap.follow(
      runId,
      (e) => {
        firstSeq ??= e.seq;
        if (ready) void stored?.read();
      },
      (e) => live?.progress(e),
    );
    const last = await lastSeq(engine, runId);
    const from = firstSeq === null ? last : Math.min(firstSeq - 1, last ?? firstSeq - 1);
    stored = new StoredEvents(engine, runId, from, (e) => live?.event(e));
    ready = true;
    void stored.read();
    const outcome = await Promise.race([
      engine.waitForRun(runId).then((done) => ({ done })),
      stored.ended.then(() => engine.getRun(runId)).then((done) => ({ done })),
      stop.received.then((signal) => ({ signal })),
    ]);
    if ("done" in outcome) await stored.read(); // the view ends with the run's last event
    stored.stop();
    stopCounts();
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
    stored?.stop();
    stopCounts();
    view?.stop();
    tap.close();
    stop.dispose();
    release();
  }
}

/** Reads the run every POLL_MS for its map counts (a failed read is left to the next); returns a function that stops. */
function readMapCounts(engine: Engine, progress: RunProgress): () => void {
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  const next = () => {
    timer = setTimeout(() => {
      void engine
        .getRun(progress.run.run_id)
        .then((run) => progress.counts(run))
        .catch(() => {})
        .finally(() => {
          if (!stopped) next();
        });
    }, POLL_MS);
  };
  next();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

/** The seq of the run's last stored event (undefined when it has none). */
async function lastSeq(engine: Engine, runId: string): Promise<number | undefined> {
  let afterSeq: number | undefined;
  for (;;) {
    const page = await engine.listEvents(runId, { limit: PAGE, ...(afterSeq === undefined ? {} : { afterSeq }) });
    afterSeq = page.at(-1)?.seq ?? afterSeq;
    if (page.length < PAGE) return afterSeq;
  }
}
