/**
 * An engine's life around its methods: registering it and recovering what dead engines left
 * (`start`), its heartbeat (its row kept fresh, and a warning about agent types nothing serves),
 * and a graceful `close` that always ends.
 */
import { hostname } from "node:os";
import type { Clock } from "../clock.js";
import { untilDeadline } from "./attempts/deadline.js";
import type { EngineParts } from "./engine-parts.js";

/** How long `close` may take, past its timeout, to record results and release the database, ms. */
const CLOSE_GRACE_MS = 2000;

/** Registers the engine, then recovers attempts of dead engines and starts dispatching (a client only dispatches). */
export async function startEngine(p: EngineParts, heartbeat: Heartbeat): Promise<void> {
  if (!p.serve) {
    p.dispatcher.startClient();
    return;
  }
  const now = p.clock.now();
  const dead = await p.store.registerEngine(
    {
      engine_id: p.engineId,
      host: hostname(),
      pid: process.pid,
      started_at: now,
      heartbeat_at: now,
      served_types: p.served.own(),
    },
    now - (p.options.engineTimeoutMs ?? 30_000),
  );
  p.dispatcher.start(dead);
  heartbeat.arm();
  p.retention?.start();
}

/** The engine's heartbeat, every `heartbeatIntervalMs` until stopped. */
export class Heartbeat {
  /** The last heartbeat's write and check of unserved agent types (tests wait for it). */
  lastBeat: Promise<void> = Promise.resolve();
  private timer: ReturnType<Clock["setTimeout"]> | null = null;

  constructor(private readonly p: EngineParts) {}

  arm(): void {
    const interval = this.p.options.heartbeatIntervalMs ?? 5000;
    this.timer = this.p.clock.setTimeout(() => {
      if (this.p.closed()) return;
      this.lastBeat = this.beat();
      this.arm();
    }, interval);
  }

  stop(): void {
    if (this.timer) this.p.clock.clearTimeout(this.timer);
  }

  /** One heartbeat: the engine's row (with what it serves now), then the warning about agent types nothing serves. */
  private async beat(): Promise<void> {
    const { p } = this;
    try {
      await p.store.heartbeat(p.engineId, p.clock.now(), p.served.own());
    } catch (err) {
      p.logger.error({ err }, "skein: engine heartbeat failed");
      return;
    }
    p.served.stale(); // the rows are read again with this engine's new one
    if (p.closed()) return;
    await p.served.check(p.engineId).catch((err: unknown) => {
      if (p.closed()) return; // the store closed under it: nothing to say
      p.logger.error({ err }, "skein: could not check which agent types are served");
    });
  }
}

/**
 * Engine.close once marked closed: no new claims, waits until `deadline` (epoch ms) for attempts
 * in flight, records their results, and releases the database.
 */
export async function closeEngine(p: EngineParts, heartbeat: Heartbeat, deadline: number): Promise<void> {
  p.external.readyWaiting(["*"]); // waiting claims return empty
  heartbeat.stop();
  p.dispatcher.stopClaiming();
  const retentionStopped = p.retention?.stop();
  const pending = p.attempts.pending();
  if (pending.length > 0) await untilDeadline(Promise.all(pending), deadline);
  // Recording what returned gets a moment of its own, even when the attempts used up the timeout.
  const recordBy = Math.max(deadline, Date.now() + CLOSE_GRACE_MS);
  await p.dispatcher.drain(recordBy);
  p.attempts.abortAll("stopped with the engine");
  p.progress.clear(); // workers' pending progress too: nothing is delivered after close
  await p.dispatcher.stop(recordBy);
  p.attempts.spans.endAll(); // attempts whose end this engine did not see
  if (retentionStopped) await untilDeadline(retentionStopped, recordBy);
  p.notifier?.stop();
  try {
    if (p.serve) await untilDeadline(p.store.stopEngine(p.engineId, p.clock.now()), recordBy);
  } catch (err) {
    // Left to look alive until its heartbeat goes stale: the next engine then recovers its attempts.
    p.logger.warn({ err }, "skein: could not record that the engine stopped");
  }
  p.metrics?.stop();
  // An MCP server started with `command` ends with its stdin: none outlives the engine.
  if (p.mcp) await untilDeadline(p.mcp.close(), Date.now() + CLOSE_GRACE_MS);
  const released = await untilDeadline(p.store.close(), Date.now() + CLOSE_GRACE_MS);
  if (!released) p.logger.warn("skein: the database connection did not close in time; left to the process's exit");
  p.subscribers.clear();
}
