/**
 * Progress kept and streamed (DESIGN §11.6, §15) through `skein serve`'s HTTP server. Every
 * `node.progress` message the client receives was kept first: progress is stored with the run's
 * events, and delivered once committed.
 *
 * - `progress_msgs_per_s`: an engine on a SQLite file with `progressIntervalMs: 0` (no chunk
 *   joined with another: each is its own event) behind createServer on a real socket, ONE SSE
 *   client (`GET /v1/stream`) counting `node.progress` messages, and 100 in-process attempts
 *   streaming text deltas at once (each calls `task.progress({ delta })` in a loop, yielding with
 *   setImmediate, MESSAGES_PER_ATTEMPT times). The figure is the messages the client received
 *   divided by the time from the first run's start to the last message's arrival. The client
 *   runs in the same process (it competes for the same CPU). Target >= 20,000.
 * - `progress_kept_msgs_per_s`: chunks kept and received per second while dag8's closed loop runs
 *   beside 100 attempts streaming flat out (the windows of `dag8_with_progress_ratio`), on an
 *   engine with the default `progressIntervalMs` (50): an attempt's deltas of one window are
 *   joined into one event (never a write per token), so the client counts chunks by their text
 *   (`token <i> `), not messages. Target >= 20,000.
 * - `dag8_with_progress_ratio`: dag8's closed loop (dag8.ts) on the same engine and server, the
 *   SSE client connected, without and then with 100 attempts streaming for the whole window
 *   (PAIRS times, in turn); the mean with / the mean without. Target >= 0.8.
 *
 * `npx tsx bench/progress.ts` runs it alone and prints the metrics (nothing is written).
 */
import { get } from "node:http";
import { fileURLToPath } from "node:url";
import { createServer } from "../src/http/server.js";
import { createEngine, type Engine, type Task } from "../src/index.js";
import { closedLoop, RunEnds } from "./dag8-loop.js";
import { deferred, type Measured, progress, tempDb, within } from "./lib.js";
import { DAG8, DAG8_AGENTS } from "./workloads.js";

const ATTEMPTS = 100;
const MESSAGES_PER_ATTEMPT = 1000;
/** Values an attempt streaming beside dag8 sends per turn of the event loop. */
const CHUNKS_PER_TURN = 4;
const DAG8_RUNS = 3000;
const DAG8_WARMUP = 300;
const DAG8_IN_FLIGHT = 200;
const MAX_LOOP_MS = 60_000;
/** dag8 windows without and with streaming, taken in turn. */
const PAIRS = 2;

const STREAM = { id: "stream", nodes: [{ node_id: "s", agent_type: "streamer" }] };

/** How the streaming handlers behave: a fixed count, or until told to stop. */
const streaming = { stopped: false, forever: false };

/**
 * One attempt's stream: progress in a loop, yielding a turn of the event loop after each value
 * (counted) or, streaming flat out beside dag8, after each CHUNKS_PER_TURN values (as a
 * provider's stream read delivers several events at once): the engine, not the event loop's
 * turns, is then what bounds the chunks kept.
 */
async function streamer(task: Task): Promise<null> {
  const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
  for (let i = 0; streaming.forever ? !streaming.stopped : i < MESSAGES_PER_ATTEMPT; i++) {
    task.progress({ delta: `token ${i} ` });
    if (!streaming.forever || i % CHUNKS_PER_TURN === CHUNKS_PER_TURN - 1) await turn();
  }
  return null;
}

/** One SSE connection counting `node.progress` messages (a marker split across chunks counted once). */
class ProgressCounter {
  count = 0;
  /** Chunks received: each streamer's delta is `token <i> `, joined ones counted each. */
  chunks = 0;
  lastAt = 0;
  private tail = "";
  private target = Number.POSITIVE_INFINITY;
  private reached = deferred();
  private readonly close: () => void;

  private constructor(base: string, connected: () => void) {
    const req = get(`${base}/v1/stream`, (res) => {
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        if (this.tail === "" && chunk.startsWith(": connected")) connected();
        const text = this.tail + chunk;
        this.count += occurrences(text, MARKER, this.tail.length);
        this.chunks += occurrences(text, TOKEN, this.tail.length);
        this.tail = text.slice(-(MARKER.length - 1));
        this.lastAt = performance.now();
        if (this.count >= this.target) this.reached.resolve();
      });
    });
    req.on("error", () => undefined);
    this.close = () => req.destroy();
  }

  static open(base: string): Promise<ProgressCounter> {
    return new Promise((resolve) => {
      const counter: ProgressCounter = new ProgressCounter(base, () => resolve(counter));
    });
  }

  /** Resolves once `n` messages in all have arrived. */
  until(n: number): Promise<void> {
    this.target = n;
    this.reached = deferred();
    if (this.count >= n) this.reached.resolve();
    return this.reached.promise;
  }

  stop(): void {
    this.close();
  }
}

/** How many times `marker` ends in `text` past its first `seen` characters (counted with the chunk before). */
function occurrences(text: string, marker: string, seen: number): number {
  let n = 0;
  for (let i = text.indexOf(marker, Math.max(0, seen - marker.length + 1)); i >= 0; i = text.indexOf(marker, i + 1))
    n++;
  return n;
}

const MARKER = "event: node.progress\n";
/** What begins each streamer's delta (shorter than MARKER: the tail kept covers a split one). */
const TOKEN = "token ";

async function startStreams(engine: Engine): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < ATTEMPTS; i++) ids.push((await engine.startRun(STREAM.id)).run_id);
  return ids;
}

/** An engine (SQLite) serving dag8 and the streamers behind the HTTP server, with one SSE client. */
async function served(progressIntervalMs: number | undefined) {
  const db = tempDb("progress");
  const engine = await createEngine({
    database: db.url,
    agents: { ...DAG8_AGENTS, streamer },
    maxConcurrency: 1000,
    ...(progressIntervalMs === undefined ? {} : { progressIntervalMs }),
  });
  const app = await createServer({ engine });
  await engine.registerWorkflow(DAG8);
  await engine.registerWorkflow(STREAM);
  const base = await app.listen({ host: "127.0.0.1", port: 0 });
  const counter = await ProgressCounter.open(base);
  return {
    engine,
    counter,
    ends: new RunEnds(engine),
    close: async () => {
      counter.stop();
      await app.close();
      await engine.close();
      db.cleanup();
    },
  };
}

/** `progress_msgs_per_s`: every value its own event (progressIntervalMs 0), streaming alone. */
async function messagesAlone(): Promise<number> {
  const s = await served(0);
  try {
    const expected = ATTEMPTS * MESSAGES_PER_ATTEMPT;
    const t0 = performance.now();
    const runs = await startStreams(s.engine);
    await within(s.counter.until(expected), 60_000, "progress: the client receiving every message");
    const seconds = (s.counter.lastAt - t0) / 1000;
    for (const id of runs) await s.ends.wait(id);
    const rate = s.counter.count / seconds;
    progress(`progress: ${s.counter.count} messages in ${seconds.toFixed(2)} s: ${Math.round(rate)}/s`);
    if (s.counter.count < expected) throw new Error(`the client received ${s.counter.count} of ${expected} messages`);
    return rate;
  } finally {
    await s.close();
  }
}

export async function benchProgress(): Promise<Measured> {
  const rate = await messagesAlone();
  const { engine, counter, ends, close } = await served(undefined);
  try {
    // 2. dag8 without, then with 100 attempts streaming through the whole window; twice, in turn,
    // so that a load that drifts (other processes on the machine) weighs on both sides alike.
    await closedLoop(engine, ends, DAG8_WARMUP, DAG8_IN_FLIGHT, MAX_LOOP_MS);
    const alone: number[] = [];
    const streamed: number[] = [];
    let during = 0;
    let duringSeconds = 0;
    for (let pair = 0; pair < PAIRS; pair++) {
      const without = await closedLoop(engine, ends, DAG8_RUNS, DAG8_IN_FLIGHT, MAX_LOOP_MS);
      alone.push(without.latencies.length / without.seconds);
      streaming.forever = true;
      streaming.stopped = false;
      const before = counter.chunks;
      const background = await startStreams(engine);
      const busy = await closedLoop(engine, ends, DAG8_RUNS, DAG8_IN_FLIGHT, MAX_LOOP_MS);
      streaming.stopped = true;
      for (const id of background) await ends.wait(id);
      streaming.forever = false;
      streamed.push(busy.latencies.length / busy.seconds);
      during += counter.chunks - before;
      duringSeconds += busy.seconds;
      progress(
        `progress: dag8 alone ${Math.round(alone[pair] ?? 0)} runs/s, with streaming ${Math.round(streamed[pair] ?? 0)} runs/s (${Math.round((counter.chunks - before) / busy.seconds)} chunks kept/s meanwhile)`,
      );
    }
    const withoutRate = alone.reduce((a, b) => a + b, 0) / PAIRS;
    const withRate = streamed.reduce((a, b) => a + b, 0) / PAIRS;
    const failures: string[] = [];
    return {
      metrics: {
        progress_msgs_per_s: rate,
        progress_kept_msgs_per_s: during / duringSeconds,
        dag8_with_progress_ratio: withRate / withoutRate,
      },
      meta: {
        progress: {
          attempts: ATTEMPTS,
          messages_per_attempt: MESSAGES_PER_ATTEMPT,
          dag8_runs_per_s_alone: withoutRate,
          dag8_runs_per_s_streaming: withRate,
          pairs: PAIRS,
          dag8_runs_per_window: DAG8_RUNS,
        },
      },
      failures,
    };
  } finally {
    streaming.forever = false;
    await close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const measured = await benchProgress();
  process.stdout.write(`${JSON.stringify(measured, null, 2)}\n`);
}
