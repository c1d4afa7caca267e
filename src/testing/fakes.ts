/**
 * Fake agents for tests: handlers with a fixed behaviour that record their calls. Pass them
 * to createTestEngine's `agents` like any handler; `fake.calls` lists what each was called with.
 */
import type { AgentHandler, Task } from "../agents/task.js";
import type { Json } from "../core/types.js";
import { NonRetryableError } from "../errors.js";

/** What a fake saw of one call: the task's data (its functions and signal left out). */
export interface FakeCall {
  run_id: string;
  node_id: string;
  visit: number;
  attempt: number;
  execution_id: string;
  payload: Json;
  input: Json;
  deps: Task["deps"];
}

/** A handler that records its calls. */
export type FakeAgent = AgentHandler & {
  /** Every call so far, in order. */
  readonly calls: FakeCall[];
};

/** An output (JSON), or a function of the task that makes one. */
export type FakeOutput = Json | ((task: Task) => unknown);

/** The task's data as a call record keeps it (fakes' `calls` and the harness's `t.calls()`). */
export function callData(task: Task): FakeCall {
  const { run_id, node_id, visit, attempt, execution_id, payload, input, deps } = task;
  return { run_id, node_id, visit, attempt, execution_id, payload, input, deps };
}

function recorded(behaviour: (task: Task) => unknown): FakeAgent {
  const calls: FakeCall[] = [];
  const handler = (task: Task) => {
    calls.push(callData(task));
    return behaviour(task);
  };
  return Object.assign(handler, { calls }) as FakeAgent;
}

const outputOf = (output: FakeOutput, task: Task) =>
  typeof output === "function" ? (output as (task: Task) => unknown)(task) : output;

/** Resolves never; rejects with the signal's reason when the attempt is aborted (its deadline, a cancel). */
function untilAborted(task: Task): Promise<never> {
  return new Promise((_resolve, reject) => {
    if (task.signal.aborted) reject(task.signal.reason);
    task.signal.addEventListener("abort", () => reject(task.signal.reason), { once: true });
  });
}

export const fake = {
  /** Returns `output` (or `output(task)`) on every call. */
  returns(output: FakeOutput = null): FakeAgent {
    return recorded(async (task) => outputOf(output, task));
  },

  /**
   * Fails attempts 1 to `times` of every visit (a retryable error, as a flaky API would), then
   * returns `output`.
   */
  failsThenReturns(times: number, output: FakeOutput = null): FakeAgent {
    return recorded(async (task) => {
      if (task.attempt <= times) throw new Error(`fake failure of attempt ${task.attempt} (fails ${times} times)`);
      return outputOf(output, task);
    });
  },

  /** Fails every call: retried up to the node's retry_count, or not at all with `retryable: false`. */
  fails(message = "fake failure", options: { retryable?: boolean } = {}): FakeAgent {
    return recorded(async () => {
      throw options.retryable === false ? new NonRetryableError(message) : new Error(message);
    });
  },

  /**
   * Hangs until the attempt's deadline (its node's `timeout`) aborts it, on attempts 1 to
   * `times` of every visit (every attempt by default), then returns `output`.
   */
  hangs(times = Number.POSITIVE_INFINITY, output: FakeOutput = null): FakeAgent {
    return recorded(async (task) => {
      if (task.attempt <= times) return untilAborted(task);
      return outputOf(output, task);
    });
  },

  /** Your own handler, with its calls recorded. */
  of(handler: AgentHandler): FakeAgent {
    return recorded((task) => handler(task));
  },
};
