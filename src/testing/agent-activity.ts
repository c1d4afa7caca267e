/**
 * What the test harness knows of the agents' handlers: which attempts' handlers are running,
 * and whether agents hold real work that moves on without the clock (a socket, a file or DNS
 * request, a child process, a real timer). Node's async_hooks see every such resource as it is
 * created, and an AsyncLocalStorage tells whether a handler created it.
 *
 * An attempt whose handler runs while no agent holds such a resource can only be waiting for
 * something the engine brings: its deadline (task.signal), a heartbeat's answer, or a promise
 * nothing will settle. That is when the harness may move the clock (see idle.ts).
 */

import { AsyncLocalStorage, createHook } from "node:async_hooks";
import { declaringAs } from "../agents/define-agent.js";
import type { AgentHandler, Task } from "../agents/task.js";
import { callData, type FakeCall } from "./fakes.js";

/** An attempt of an agent as the harness saw it start: the task's data, without its functions. */
export interface AgentCall extends FakeCall {
  agent_type: string;
  /** Set when the call undoes a visit (a compensation). */
  compensates?: Task["compensates"];
  /** Set when the call runs a map's item: its index. */
  item?: Task["item"];
  /** The clock's time when the handler was called, epoch ms. */
  at: number;
}

/**
 * Promises and queued callbacks are not work of their own: they settle only when something
 * else does. Every other resource (sockets, file and DNS requests, timers, immediates, child
 * processes, workers) is.
 */
const NOT_WORK = new Set(["PROMISE", "TickObject", "Microtask"]);

interface Resource {
  type: string;
  agent_type: string;
}

/** One per test engine; `close` turns its hook off. */
export class AgentActivity {
  private readonly context = new AsyncLocalStorage<string>();
  /** Live resources created inside a handler (its attempt may have ended: a pooled socket is reused). */
  private readonly resources = new Map<number, Resource>();
  /** Handlers running now, by `execution_id#attempt`. */
  private readonly running = new Map<string, string>();
  private readonly calls: AgentCall[] = [];
  private changed: (() => void) | null = null;
  private readonly hook = createHook({
    init: (asyncId, type) => {
      if (NOT_WORK.has(type)) return;
      const agent_type = this.context.getStore();
      if (agent_type !== undefined) this.resources.set(asyncId, { type, agent_type });
    },
    destroy: (asyncId) => {
      if (this.resources.delete(asyncId)) this.notify();
    },
  });

  constructor(private readonly now: () => number) {
    this.hook.enable();
  }

  /** The handler, run inside the agent's context and recorded. */
  wrap(agentType: string, handler: AgentHandler): AgentHandler {
    return declaringAs((task) => {
      const key = `${task.execution_id}#${task.attempt}`;
      this.calls.push(callOf(agentType, task, this.now()));
      this.running.set(key, agentType);
      const done = () => {
        this.running.delete(key);
        this.notify();
      };
      try {
        const value = this.context.run(agentType, () => handler(task));
        Promise.resolve(value).then(done, done);
        return value;
      } catch (e) {
        done();
        throw e;
      }
    }, handler);
  }

  /** Whether this attempt's handler is running now. */
  isRunning(executionId: string, attempt: number): boolean {
    return this.running.has(`${executionId}#${attempt}`);
  }

  /** The live resources agents created, by type, e.g. `{ TCPWRAP: 1, Timeout: 2 }`. */
  work(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const r of this.resources.values()) counts[r.type] = (counts[r.type] ?? 0) + 1;
    return counts;
  }

  hasWork(): boolean {
    return this.resources.size > 0;
  }

  /** The calls recorded so far, in the order the handlers were called; of one agent type if given. */
  callsOf(agentType?: string): AgentCall[] {
    return this.calls.filter((c) => agentType === undefined || c.agent_type === agentType);
  }

  /** Resolves when an agent's resource ends or a handler returns (or at `ms` of real time: false). */
  nextChange(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.changed = null;
        resolve(false);
      }, ms);
      timer.unref();
      this.changed = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }

  close(): void {
    this.hook.disable();
    this.resources.clear();
    this.notify();
  }

  private notify(): void {
    const changed = this.changed;
    this.changed = null;
    changed?.();
  }
}

function callOf(agentType: string, task: Task, at: number): AgentCall {
  return {
    agent_type: agentType,
    ...callData(task),
    ...(task.compensates ? { compensates: task.compensates } : {}),
    ...(task.item ? { item: task.item } : {}),
    at,
  };
}
