/**
 * createTestEngine(): an engine on in-memory SQLite with a ManualClock that skips forward to
 * the next due time when nothing else can make progress, so a test of "retry after 30 s, then a
 * review that times out after 12 h" runs in milliseconds. The idle rule is in `settle` and
 * due-work.ts; docs/testing.md says it in words.
 */
import { pino } from "pino";
import type { AgentHandler } from "../agents/task.js";
import { ManualClock } from "../clock.js";
import type { Json, LiveEvent, Visit } from "../core/types.js";
import { createEngine, type Engine } from "../engine/engine.js";
import type { EngineOptions, ReviewOptions, RunWithNodes } from "../engine/engine-options.js";
import type { SendEventOptions } from "../engine/events.js";
import { type Duration, parseDuration } from "../engine/retention.js";
import type { SendEventAnswer } from "../engine/writer/inputs.js";
import { EngineClosedError, ValidationError } from "../errors.js";
import { AgentActivity, type AgentCall } from "./agent-activity.js";
import { nextTimeDue } from "./due-work.js";

const DAY_MS = 86_400_000;

export interface TestEngineOptions extends Omit<EngineOptions, "database" | "clock"> {
  /** Workflow definitions to register before the test starts (what registerWorkflow takes). */
  workflows?: readonly Parameters<Engine["registerWorkflow"]>[0][];
  /** Where the manual clock starts: epoch ms, a Date or ISO 8601 text. @defaultValue 2026-01-01T00:00:00Z */
  start?: number | Date | string;
  /**
   * The most engine events (plus clock jumps) one runUntilIdle, advance, review, sendEvent or
   * result may take before it stops with an error: a workflow that retries or loops for ever
   * fails the test instead of spinning. @defaultValue 10000
   */
  maxSteps?: number;
  /**
   * How long, in real ms, the harness waits for an agent's own I/O or timers (which it never
   * skips) to move on before it fails with the resources still open. @defaultValue 10000
   */
  busyTimeoutMs?: number;
}

/**
 * An engine for tests: in-memory SQLite, a ManualClock, quiet logs, the given agents and
 * workflows registered.
 * @example
 * const t = await createTestEngine({ agents: { collector }, workflows: [workflow] });
 * const run = await t.engine.startRun("content-publish", { input: {} });
 * const done = await t.result(run.run_id);
 * await t.close();
 */
export async function createTestEngine(options: TestEngineOptions = {}): Promise<TestEngine> {
  const { workflows = [], start, maxSteps = 10_000, busyTimeoutMs = 10_000, agents = {}, ...rest } = options;
  const clock = new ManualClock(startTime(start));
  const activity = new AgentActivity(() => clock.now());
  // Every in-process handler: the given agents and the built-in kinds' (an llm node's call is I/O
  // the harness must wait for, never skip); the pure aggregator is left as it is.
  const inProcess = new Set<string>(["aggregator"]);
  const wrapHandler = (type: string, handler: AgentHandler): AgentHandler => {
    inProcess.add(type);
    return type === "aggregator" && !(type in agents) ? handler : activity.wrap(type, handler);
  };
  let engine: Engine;
  try {
    engine = await createEngine({
      // The sweep and heartbeat only back up the wake-up timer on one in-memory engine; daily, a
      // skip of 30 days fires them 30 times instead of 2.6 million (every second).
      sweepIntervalMs: DAY_MS,
      heartbeatIntervalMs: DAY_MS,
      engineTimeoutMs: 3 * DAY_MS,
      logger: pino({ level: "silent" }),
      // The clock stands still while a handler runs: a throttle would deliver only its first value.
      progressIntervalMs: 0,
      ...rest,
      agents,
      wrapHandler,
      database: "sqlite::memory:",
      clock,
    });
  } catch (e) {
    activity.close();
    throw e;
  }
  const t = new TestEngine(engine, clock, activity, { maxSteps, busyTimeoutMs }, [...inProcess]);
  try {
    for (const workflow of workflows) await engine.registerWorkflow(workflow);
  } catch (e) {
    await t.close();
    throw e;
  }
  return t;
}

export class TestEngine {
  private closed = false;
  /** Agent types with a handler in this process: the user's and the built-in kinds' (aggregator, llm). */
  private readonly inProcess: ReadonlySet<string>;

  /** @internal use createTestEngine */
  constructor(
    /** The engine: start runs, read them, cancel, redrive, as in production. */
    readonly engine: Engine,
    /** The engine's clock; `advance` and `runUntilIdle` move it. */
    readonly clock: ManualClock,
    private readonly activity: AgentActivity,
    private readonly limits: { maxSteps: number; busyTimeoutMs: number },
    agentTypes: readonly string[],
  ) {
    this.inProcess = new Set(agentTypes);
  }

  /**
   * Runs the engine until every run has ended or waits on something outside it (a review, an
   * event, an external worker), moving the clock to the next due time whenever only time stands
   * between a run and its progress: a retry's backoff, a sleep, the deadline of an attempt whose
   * handler waits with no I/O of its own, a run's timeout while it waits on one of those.
   * @throws Error after `maxSteps` (a workflow that never settles), or when an agent's own I/O
   *   or timers stay open for `busyTimeoutMs`; EngineClosedError after close
   */
  async runUntilIdle(): Promise<void> {
    await this.steps("runUntilIdle", async (budget) => {
      for (;;) {
        await this.settle(budget);
        const due = await nextTimeDue(this.engine, {
          isHung: (id, attempt) => this.activity.isRunning(id, attempt),
          inProcess: (type) => this.inProcess.has(type),
          nextTimer: () => this.clock.nextTimerAt(),
          now: this.clock.now(),
        });
        if (due === null) return;
        budget.jump(due.run_id, due.node_id);
        // A due time already passed without the engine acting is looked at a millisecond on.
        await this.moveTo(Math.max(due.at, this.clock.now() + 1), budget);
      }
    });
  }

  /**
   * Moves the clock forward by `duration` (seconds, or "90s", "45m", "12h", "30d"), letting the
   * engine react at each due time on the way (review and event timeouts included), then waits
   * until it has nothing left to do without more time passing.
   */
  async advance(duration: Duration): Promise<void> {
    const ms = parseDuration(duration, "advance(duration)");
    await this.steps("advance", async (budget) => {
      await this.settle(budget);
      await this.moveTo(this.clock.now() + ms, budget);
    });
  }

  /** runUntilIdle, then decides the waiting `human_review` node (see Engine.review). */
  async review(runId: string, nodeId: string, decision: ReviewOptions): Promise<Visit> {
    await this.runUntilIdle();
    return this.engine.review(runId, nodeId, decision);
  }

  /** runUntilIdle, then sends an event to the run (see Engine.sendEvent). */
  async sendEvent(runId: string, name: string, payload: Json = null, options: SendEventOptions = {}) {
    await this.runUntilIdle();
    return this.engine.sendEvent(runId, name, payload, options) as Promise<SendEventAnswer>;
  }

  /** runUntilIdle, then the run as getRun reads it: ended, or waiting on something outside. */
  async result(runId: string): Promise<RunWithNodes> {
    await this.runUntilIdle();
    return this.engine.getRun(runId);
  }

  /** Every call of the agents given to createTestEngine (or of one agent type), in call order. */
  calls(agentType?: string): AgentCall[] {
    return this.activity.callsOf(agentType);
  }

  /** Closes the engine at once (attempts still hanging are aborted) and stops watching agents. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.engine.close({ timeoutMs: 0 });
    } finally {
      this.activity.close();
    }
  }

  /**
   * Waits, without moving the clock past now, until the engine is idle: no flush queued or
   * running, no timer due now, every attempt in flight either done or hung (its handler running
   * with no socket, file request, timer or child process of any agent open). An agent's own
   * I/O is waited for, event by event, never skipped.
   */
  private async settle(budget: Budget): Promise<void> {
    let quiet = false;
    for (;;) {
      budget.check();
      const timer = this.clock.nextTimerAt();
      if (timer !== null && timer <= this.clock.now()) {
        await this.clock.advance(0);
        continue;
      }
      const { working, held } = this.engine.activity();
      // An attempt held but not in a handler is being started or its result checked: engine work.
      if (working || held.some((h) => !this.activity.isRunning(h.execution_id, h.attempt))) {
        await turn();
        continue;
      }
      if (held.length === 0) return;
      if (!this.activity.hasWork()) {
        // A handler that has just started may not have opened its socket yet (fetch with a body
        // connects a few ticks later), and one whose server just cut the connection still has
        // the error to throw: one turn of the event loop before it counts as hung.
        if (quiet) return;
        quiet = true;
        await turn();
        continue;
      }
      quiet = false;
      if (!(await this.activity.nextChange(this.limits.busyTimeoutMs))) throw this.busyError(held.length);
    }
  }

  /** Moves the clock to `target`, stopping at each timer on the way for the engine to react. */
  private async moveTo(target: number, budget: Budget): Promise<void> {
    for (;;) {
      const timer = this.clock.nextTimerAt();
      if (timer === null || timer > target) break;
      budget.jump(null, null);
      await this.clock.advance(Math.max(0, timer - this.clock.now()));
      await this.settle(budget);
    }
    await this.clock.advance(Math.max(0, target - this.clock.now()));
    await this.settle(budget);
  }

  private async steps(what: string, body: (budget: Budget) => Promise<void>): Promise<void> {
    if (this.closed)
      throw new EngineClosedError(`${what}: this test engine is closed; create another with createTestEngine()`);
    const budget = new Budget(what, this.limits.maxSteps);
    const off = this.engine.subscribe((e) => budget.event(e));
    try {
      await body(budget);
    } finally {
      off();
    }
  }

  private busyError(attempts: number): Error {
    const open = Object.entries(this.activity.work())
      .map(([type, n]) => `${type} x${n}`)
      .join(", ");
    return new Error(
      `the test engine waited ${this.limits.busyTimeoutMs} ms for agents' own work to move on (${attempts} attempt(s) in flight; open: ${open}). ` +
        "It never moves the clock while a socket, file request, timer or child process an agent made is open, since those move on by themselves. " +
        "An agent that keeps one open for ever (a setInterval, a connection pool made inside a handler) keeps it waiting: close it when the handler ends, make the client outside the handler, or raise busyTimeoutMs",
    );
  }
}

/** The runaway guard: engine events and clock jumps counted against maxSteps. */
class Budget {
  private used = 0;
  private readonly busiest = new Map<string, number>();

  constructor(
    private readonly what: string,
    private readonly max: number,
  ) {}

  event(e: LiveEvent): void {
    // Progress is not a step: a handler streaming many values is not a runaway workflow.
    if (e.type !== "node.progress") this.count(e.run_id, e.node_id);
  }

  jump(runId: string | null, nodeId: string | null): void {
    this.count(runId, nodeId);
  }

  check(): void {
    if (this.used <= this.max) return;
    const [where, n] = [...this.busiest].sort((a, b) => b[1] - a[1])[0] ?? ["nothing", 0];
    throw new Error(
      `${this.what} stopped after ${this.max} steps (engine events and clock jumps) without the engine becoming idle; ` +
        `the busiest was ${where} (${n} steps): a workflow that retries or loops without end? ` +
        "Give the node a retry_count or max_visits, or raise createTestEngine's maxSteps for a bigger test",
    );
  }

  private count(runId: string | null, nodeId: string | null): void {
    this.used += 1;
    if (runId === null) return;
    const key = nodeId === null ? `run ${runId}` : `node "${nodeId}" of run ${runId}`;
    this.busiest.set(key, (this.busiest.get(key) ?? 0) + 1);
  }
}

/** One turn of the event loop: the engine's immediates and I/O callbacks run. */
function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function startTime(start: number | Date | string | undefined): number | undefined {
  if (start === undefined) return undefined;
  const ms = start instanceof Date ? start.getTime() : typeof start === "string" ? Date.parse(start) : start;
  if (!Number.isFinite(ms)) {
    throw new ValidationError(
      `start must be epoch ms, a Date or ISO 8601 text such as "2026-01-01T09:00:00Z"; got ${JSON.stringify(start)}`,
    );
  }
  return ms;
}
