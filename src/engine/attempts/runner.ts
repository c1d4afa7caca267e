/**
 * Runs in-process attempts: builds the task of DESIGN §5, calls the handler, and turns whatever
 * it does (returns, routes, throws, hangs, returns garbage) into one result submitted to the
 * writer. Its parts, also used for external workers: judging a value and deciding its edges
 * (outcomes.ts), resolving payloads (payloads.ts). They run outside any transaction; the writer
 * re-checks the fence when it applies the result.
 */

import type { Logger } from "pino";
import { declaredSecrets } from "../../agents/define-agent.js";
import { type AgentHandler, type DecideHook, isRouted, route, type Task } from "../../agents/task.js";
import { addUsage, isEmptyUsage, NO_USAGE, usageProblem } from "../../core/budget.js";
import { type ApprovalRequest, AwaitingApproval } from "../../core/kinds/agent.js";
import type { Json, Usage } from "../../core/types.js";
import type { WorkflowGraph } from "../../definition/graph.js";
import { needsDeclaredSecrets } from "../../definition/kinds/index.js";
import { NonRetryableError } from "../../errors.js";
import type { Store } from "../../store/store.js";
import type { WorkflowRegistry } from "../registry.js";
import { RunSpans } from "../telemetry/run-spans.js";
import type { AttemptResult, ClaimedTask, Input, Submit } from "../writer/inputs.js";
import { errorOf, isNonRetryable } from "./handler-errors.js";
import { Outcomes } from "./outcomes.js";
import { Payloads } from "./payloads.js";
import type { ProgressSource, ProgressStreams } from "./progress.js";
import { notConfigured, type Secrets } from "./secrets.js";
import { StepJournal } from "./steps.js";

type UsageInput = Extract<Input, { kind: "usage" }>;

export interface AttemptRunnerOptions {
  handlers: ReadonlyMap<string, AgentHandler>;
  decideHooks: Readonly<Record<string, DecideHook>>;
  registry: WorkflowRegistry;
  store: Store;
  logger: Logger;
  /** Largest accepted output or resolved payload, in bytes of JSON. */
  maxOutputBytes: number;
  /** Where `task.progress` goes (throttled per attempt, live only). */
  progress: ProgressStreams;
  /** The engine's secrets (DESIGN §12): filled into payloads at dispatch, redacted from what attempts give back. */
  secrets: Secrets;
  /** Where results, heartbeats, usage and resolved payloads go: the writer's queue. */
  submit: Submit;
}

/** The tokens an attempt reported using so far (`task.reportUsage`): its result settles its type's window with them. */
interface UsedTokens {
  tokens: number;
}

interface Held {
  attempt: number;
  agent_type: string;
  abort: LazyAbort;
  /** Settles when the handler returns or throws (never, for a handler that hangs). */
  finished: Promise<void>;
}

export class AttemptRunner {
  private readonly held = new Map<string, Held>();
  private readonly byType = new Map<string, number>();
  /** The spans of this engine's runs: attempts in process and for external workers, held visits. */
  readonly spans = new RunSpans();
  /** Judges agents' values and decides their edges (in process, external workers, approved reviews). */
  readonly outcomes: Outcomes;
  /** Resolves payload templates: ready visits' (stored by the writer), compensations' (at each attempt). */
  readonly payloads: Payloads;

  constructor(private readonly o: AttemptRunnerOptions) {
    const { registry, store, secrets, maxOutputBytes, submit } = o;
    this.outcomes = new Outcomes({ decideHooks: o.decideHooks, registry, store, maxOutputBytes });
    const runsInProcess = (agentType: string) => o.handlers.has(agentType);
    this.payloads = new Payloads({ registry, store, runsInProcess, secrets, maxOutputBytes, submit });
  }

  inFlight(): { total: number; byType: ReadonlyMap<string, number> } {
    return { total: this.held.size, byType: this.byType };
  }

  /** @internal the attempts held in process, and whether payloads are being resolved (the test harness) */
  activity(): { held: { execution_id: string; attempt: number }[]; resolving: boolean } {
    const held = [...this.held].map(([execution_id, h]) => ({ execution_id, attempt: h.attempt }));
    return { held, resolving: this.payloads.busy() };
  }

  /** Handler promises of the attempts still held, for a graceful close. */
  pending(): Promise<void>[] {
    return [...this.held.values()].map((h) => h.finished);
  }

  dispatch(task: ClaimedTask): void {
    const handler = this.o.handlers.get(task.agent_type);
    const abort = new LazyAbort();
    let finish!: () => void;
    const held: Held = {
      attempt: task.attempt,
      agent_type: task.agent_type,
      abort,
      finished: new Promise((resolve) => {
        finish = resolve;
      }),
    };
    this.held.set(task.execution_id, held);
    this.byType.set(task.agent_type, (this.byType.get(task.agent_type) ?? 0) + 1);
    const used: UsedTokens = { tokens: 0 };
    void this.run(task, handler, abort, used).then((input) => {
      finish();
      this.release(task.execution_id, task.attempt);
      // Its claim took tokens of its type's window: the result settles them with what it used.
      const expected = task.expected_tokens;
      this.o.submit(expected === undefined ? input : { ...input, tokens: { expected, used: used.tokens } });
    });
  }

  /** Aborts an attempt's signal and stops counting it (its late result will be fenced). */
  abort(executionId: string, reason: string): void {
    const held = this.held.get(executionId);
    if (!held) return;
    this.release(executionId, held.attempt);
    held.abort.abort(new Error(`attempt ${held.attempt} of ${executionId} was ${reason}`));
  }

  abortAll(reason: string): void {
    for (const id of [...this.held.keys()]) this.abort(id, reason);
  }

  private release(executionId: string, attempt: number): void {
    const held = this.held.get(executionId);
    if (!held || held.attempt !== attempt) return;
    this.held.delete(executionId);
    this.o.progress.end(executionId, attempt);
    this.byType.set(held.agent_type, (this.byType.get(held.agent_type) ?? 1) - 1);
  }

  private async run(
    task: ClaimedTask,
    handler: AgentHandler | undefined,
    signal: LazyAbort,
    used: UsedTokens,
  ): Promise<AttemptResult> {
    const at = { execution_id: task.execution_id, attempt: task.attempt };
    const { span, traceparent } = this.spans.startAttempt(task);
    try {
      if (!handler) throw new NonRetryableError(`no handler is registered for agent_type "${task.agent_type}"`);
      if (task.compensates) {
        const payload = await this.payloads.compensation(task);
        const value = await this.spans.within(span, () =>
          handler(this.task({ ...task, payload }, traceparent, signal, used)),
        );
        return this.outcomes.compensationOutcome(at, this.redacted(value));
      }
      if (task.item && task.payload === null) {
        // A map item's payload is resolved at each attempt, outside any transaction (payloads.ts).
        const resolved = await this.payloads.item({ ...task, item: task.item });
        if ("problem" in resolved) {
          const error = { message: resolved.problem, reason: "template_error" };
          return { kind: "fail_visit", ...at, reason: "template_error", error };
        }
        task = { ...task, payload: resolved.payload };
      }
      // Loaded by the claim's flush: the handler starts in this tick (the test harness counts on it).
      const loaded =
        this.o.registry.cached(task.workflow_id, task.workflow_version) ??
        (await this.o.registry.get(task.workflow_id, task.workflow_version));
      const withSecrets = this.withSecrets(task, handler, loaded.graph);
      if ("kind" in withSecrets) return withSecrets;
      const value = await this.spans.within(span, () =>
        handler(this.task(withSecrets.task, traceparent, signal, used)),
      );
      return await this.outcomes.outcome(task, this.redacted(value));
    } catch (e) {
      // The agent node's loop ends its attempt to wait for a person (core/kinds/agent.ts).
      if (e instanceof AwaitingApproval) {
        const request = this.o.secrets.redact(e.request as unknown as Json) as unknown as ApprovalRequest;
        return { kind: "await_approval", ...at, request };
      }
      return { kind: "failure", ...at, error: this.o.secrets.redact(errorOf(e)), retryable: !isNonRetryable(e) };
    }
  }

  /**
   * The task with its secrets' values put in at the paths its node's templates read them
   * (DESIGN §12), or the failure when it may not have them: a name this engine lacks fails the
   * visit `template_error`, a name a `task` node's agent did not declare fails the attempt.
   */
  private withSecrets(
    task: ClaimedTask,
    handler: AgentHandler,
    graph: WorkflowGraph,
  ): { task: ClaimedTask } | AttemptResult {
    const node = graph.nodes.get(task.node_id);
    if (!node || node.secretUses.length === 0) return { task };
    const at = { execution_id: task.execution_id, attempt: task.attempt };
    const missing = node.secretNames.find((name) => !this.o.secrets.has(name));
    if (missing !== undefined) {
      const error = { message: notConfigured(missing), reason: "template_error" };
      return { kind: "fail_visit", ...at, reason: "template_error", error };
    }
    for (const name of node.secretNames) {
      const refused = this.o.secrets.workflowRefusal(name, task.workflow_id);
      if (refused !== null) throw new NonRetryableError(`node ${task.node_id}: ${refused}`);
    }
    if (needsDeclaredSecrets(node.kind)) {
      const declared = declaredSecrets(handler);
      const undeclared = node.secretNames.filter((name) => !declared.includes(name));
      if (undeclared.length > 0) {
        const list = undeclared.map((n) => JSON.stringify(n)).join(", ");
        throw new NonRetryableError(
          `node ${task.node_id} reads ${undeclared.map((n) => `secrets.${n}`).join(", ")} in its payload, but agent "${task.agent_type}" does not declare it: define it with defineAgent({ secrets: [${list}] }, handler)`,
        );
      }
    }
    return { task: { ...task, payload: this.o.secrets.fill(task.payload, node.secretUses) } };
  }

  /** A handler's value with every secret's value replaced by its placeholder (a route's output too). */
  private redacted(value: unknown): unknown {
    if (isRouted(value)) return route(value.next, this.o.secrets.redact(value.output));
    return this.o.secrets.redact(value);
  }

  private task(t: ClaimedTask, traceparent: string, abort: LazyAbort, used: UsedTokens): Task {
    const source: ProgressSource = {
      run_id: t.run_id,
      node_id: t.node_id,
      visit: t.visit,
      attempt: t.attempt,
      execution_id: t.execution_id,
      trace_id: t.trace_id,
    };
    // The attempt's usage input not yet taken by a flush: later reports fold into it.
    let pending: UsageInput | null = null;
    let journal: StepJournal | null = null;
    return {
      run_id: t.run_id,
      node_id: t.node_id,
      agent_type: t.agent_type,
      visit: t.visit,
      attempt: t.attempt,
      execution_id: t.execution_id,
      payload: t.payload,
      input: t.input,
      deps: t.deps,
      trigger: t.trigger,
      ...(t.compensates ? { compensates: t.compensates } : {}),
      ...(t.item ? { item: t.item } : {}),
      trace_id: t.trace_id,
      traceparent,
      get signal() {
        return abort.signal;
      },
      heartbeat: () =>
        new Promise<boolean>((resolve, reject) => {
          this.o.submit({
            kind: "heartbeat",
            execution_id: t.execution_id,
            attempt: t.attempt,
            done: { resolve, reject },
          });
        }),
      progress: (data: unknown) => {
        // Only while the attempt holds its visit: after its end, abort or lease loss, dropped.
        // Redacted like the output: a secret's value never leaves the attempt runner.
        if (this.held.get(t.execution_id)?.attempt === t.attempt) {
          this.o.progress.offer(source, this.o.secrets.redact(data));
        }
      },
      reportUsage: (usage: Usage) => {
        pending = this.reportUsage(t, usage, pending, used);
      },
      step: (name, fn) => {
        journal ??= this.journal(t, abort);
        return journal.step(name, fn);
      },
      route,
    };
  }

  /** The attempt's steps (DESIGN §14.1): read from the store, recorded through the writer. */
  private journal(t: ClaimedTask, abort: LazyAbort): StepJournal {
    const { execution_id, attempt } = t;
    const held = () => this.held.get(execution_id)?.attempt === attempt;
    const recorder = {
      recorded: async () => new Map((await this.o.store.stepsOf([execution_id])).map((r) => [r.name, r.output])),
      record: (name: string, output: Json, size: number) =>
        new Promise<{ output: Json; attempt: number }>((resolve, reject) => {
          const done = { resolve: (row: { output: Json; attempt: number }) => resolve(row), reject };
          this.o.submit({ kind: "step", execution_id, attempt, name, output, size, done });
        }),
      held,
      lost: (reason: string) => {
        if (held()) this.abort(execution_id, `refused a step: ${reason}`);
      },
    };
    return new StepJournal(t, recorder, {
      signal: () => abort.signal,
      maxBytes: this.o.maxOutputBytes,
      redact: (value) => this.o.secrets.redact(value),
    });
  }

  /**
   * A usage report of an attempt (DESIGN §12): checked (a bad value is logged and ignored, never
   * thrown into the handler), then added to the attempt's queued usage input while no flush has
   * taken it, else queued as a new one. Returns the input later calls may add to.
   */
  private reportUsage(t: ClaimedTask, usage: unknown, pending: UsageInput | null, used: UsedTokens): UsageInput | null {
    const problem = usageProblem(usage);
    if (problem) {
      this.o.logger.warn(
        { execution_id: t.execution_id, attempt: t.attempt },
        `task.reportUsage ignored: ${problem}; report { tokens_in, tokens_out, cost } as non-negative numbers`,
      );
      return pending;
    }
    const figures = usage as Usage;
    if (isEmptyUsage(figures)) return pending;
    used.tokens += (figures.tokens_in ?? 0) + (figures.tokens_out ?? 0);
    if (pending && !pending.taken) {
      pending.usage = addUsage(pending.usage, figures);
      return pending;
    }
    const input: UsageInput = {
      kind: "usage",
      execution_id: t.execution_id,
      attempt: t.attempt,
      usage: addUsage(NO_USAGE, figures),
      usage_runs: t.usage_runs,
      taken: false,
    };
    this.o.submit(input);
    return input;
  }
}

/** An AbortController made on first use: most handlers never read their signal. */
class LazyAbort {
  private controller: AbortController | null = null;
  private reason: unknown = null;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.reason !== null) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  abort(reason: Error): void {
    if (this.reason !== null) return;
    this.reason = reason;
    this.controller?.abort(reason);
  }
}
