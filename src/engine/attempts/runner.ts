/**
 * Runs in-process attempts: builds the task of DESIGN §5, calls the handler, turns whatever it
 * does (returns, routes, throws, hangs, returns garbage) into one input for the dispatcher, and
 * resolves payload templates. Expressions (JSONata) are asynchronous, so they run here, outside
 * any transaction; the dispatcher re-checks the fence when it applies the result.
 */
import type { Logger } from "pino";
import { declaredSecrets } from "../../agents/define-agent.js";
import { type AgentHandler, type DecideHook, isRouted, route, type Task } from "../../agents/task.js";
import { checkRoute } from "../../core/branching.js";
import { addUsage, isEmptyUsage, NO_USAGE, usageProblem } from "../../core/budget.js";
import { needsDeclaredSecrets } from "../../core/kinds/index.js";
import type { Decision } from "../../core/scheduler.js";
import type { Json, RunParent, Usage, VisitError } from "../../core/types.js";
import type { ExpressionContext } from "../../definition/expressions.js";
import type { CompiledNode, WorkflowGraph } from "../../definition/graph.js";
import { NonRetryableError, NotFoundError, RetryableError } from "../../errors.js";
import type { Store, VisitKey } from "../../store/store.js";
import { jsonProblem } from "../json.js";
import type { WorkflowRegistry } from "../registry.js";
import { RunSpans } from "../telemetry/run-spans.js";
import type { RunRef } from "../writer/dispatcher-options.js";
import type { AttemptRef, AttemptResult, ClaimedTask, Input, Submit } from "../writer/inputs.js";
import type { ProgressSource, ProgressStreams } from "./progress.js";
import { type Markers, markers, notConfigured, type Secrets, seal, unmark } from "./secrets.js";

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

interface Held {
  attempt: number;
  agent_type: string;
  abort: LazyAbort;
  /** Settles when the handler returns or throws (never, for a handler that hangs). */
  finished: Promise<void>;
}

/** What judging an attempt's result needs to know of its task. */
export type ResultOf = Pick<
  ClaimedTask,
  "execution_id" | "attempt" | "run_id" | "node_id" | "trace_id" | "input" | "workflow_id" | "workflow_version"
>;

export class AttemptRunner {
  private readonly held = new Map<string, Held>();
  private readonly byType = new Map<string, number>();
  private readonly resolving = new Set<string>();
  /** The spans of this engine's runs: attempts in process and for external workers, held visits. */
  readonly spans = new RunSpans();

  constructor(private readonly o: AttemptRunnerOptions) {}

  inFlight(): { total: number; byType: ReadonlyMap<string, number> } {
    return { total: this.held.size, byType: this.byType };
  }

  /** @internal the attempts held in process, and whether payloads are being resolved (the test harness) */
  activity(): { held: { execution_id: string; attempt: number }[]; resolving: boolean } {
    const held = [...this.held].map(([execution_id, h]) => ({ execution_id, attempt: h.attempt }));
    return { held, resolving: this.resolving.size > 0 };
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
    void this.run(task, handler, abort).then((input) => {
      finish();
      this.release(task.execution_id, task.attempt);
      this.o.submit(input);
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

  private async run(task: ClaimedTask, handler: AgentHandler | undefined, signal: LazyAbort): Promise<AttemptResult> {
    const at = { execution_id: task.execution_id, attempt: task.attempt };
    const { span, traceparent } = this.spans.startAttempt(task);
    try {
      if (!handler) throw new NonRetryableError(`no handler is registered for agent_type "${task.agent_type}"`);
      if (task.compensates) {
        const payload = await this.compensationPayload(task);
        const value = await this.spans.within(span, () =>
          handler(this.task({ ...task, payload }, traceparent, signal)),
        );
        return this.compensationOutcome(at, this.redacted(value));
      }
      // Loaded by the claim's flush: the handler starts in this tick (the test harness counts on it).
      const loaded =
        this.o.registry.cached(task.workflow_id, task.workflow_version) ??
        (await this.o.registry.get(task.workflow_id, task.workflow_version));
      const withSecrets = this.withSecrets(task, handler, loaded.graph);
      if ("kind" in withSecrets) return withSecrets;
      const value = await this.spans.within(span, () => handler(this.task(withSecrets.task, traceparent, signal)));
      return await this.outcome(task, this.redacted(value));
    } catch (e) {
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

  private task(t: ClaimedTask, traceparent: string, abort: LazyAbort): Task {
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
        pending = this.reportUsage(t, usage, pending);
      },
      route,
    };
  }

  /**
   * A usage report of an attempt (DESIGN §12): checked (a bad value is logged and ignored, never
   * thrown into the handler), then added to the attempt's queued usage input while no flush has
   * taken it, else queued as a new one. Returns the input later calls may add to.
   */
  private reportUsage(t: ClaimedTask, usage: unknown, pending: UsageInput | null): UsageInput | null {
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

  /** A compensation's result: its output, checked like a visit's; it fires no edges. */
  compensationOutcome(at: AttemptRef, value: unknown): AttemptResult {
    const checked = this.checkOutput(at, value);
    if (!checked.ok) return checked.failure;
    return { kind: "success", ...at, output: checked.output, decision: { kind: "targets", targets: [] } };
  }

  /** An agent's output checked (JSON, within the size limit), or the failure it earns: not retried. */
  private checkOutput(
    at: AttemptRef,
    value: unknown,
  ): { ok: true; output: Json } | { ok: false; failure: AttemptResult } {
    const checked = this.checkJson(value === undefined ? null : value, "output");
    if (checked.ok) return { ok: true, output: checked.value };
    const error = { message: checked.problem, reason: "invalid_output" };
    return { ok: false, failure: { kind: "failure", ...at, error, retryable: false } };
  }

  /** Checks an agent's value (in process or external) and works out the edge decision. */
  async outcome(t: ResultOf, value: unknown): Promise<AttemptResult> {
    const at = { execution_id: t.execution_id, attempt: t.attempt };
    const routed = isRouted(value) ? value : null;
    const checked = this.checkOutput(at, routed ? routed.output : value);
    if (!checked.ok) return checked.failure;
    const output = checked.output;
    const { graph } = await this.o.registry.get(t.workflow_id, t.workflow_version);
    const node = graph.nodes.get(t.node_id) as CompiledNode;
    const decided = await this.decide(t, graph, node, output, routed?.next ?? null);
    if ("decision" in decided) return { kind: "success", ...at, output, decision: decided.decision };
    return {
      kind: "fail_visit",
      ...at,
      reason: decided.reason,
      error: { message: decided.message, reason: decided.reason },
    };
  }

  /** Branch precedence of DESIGN §4: agent route, then decide hook, then `when` cases, then the plain list. */
  /** The edges an approved review's output fires: the decide hook, `when` cases or the plain list. */
  async decideOutput(
    run: { run_id: string; trace_id: string; input: Json; workflow_id: string; workflow_version: number },
    nodeId: string,
    output: Json,
  ): Promise<{ decision: Decision } | { reason: string; message: string }> {
    const { graph } = await this.o.registry.get(run.workflow_id, run.workflow_version);
    const node = graph.nodes.get(nodeId);
    if (!node) throw new NotFoundError(`run ${run.run_id} has no node "${nodeId}"`);
    return this.decide({ ...run, node_id: nodeId }, graph, node, output, null);
  }

  private async decide(
    t: Pick<ClaimedTask, "run_id" | "node_id" | "trace_id" | "input">,
    graph: WorkflowGraph,
    node: CompiledNode,
    output: Json,
    next: string[] | null,
  ): Promise<{ decision: Decision } | { reason: string; message: string }> {
    const checked = (targets: string[], what: string) => {
      const d = checkRoute(graph, node, targets);
      return "invalid" in d ? { reason: "invalid_next", message: `${what}: ${d.invalid}` } : { decision: d };
    };
    if (next) return checked(next, "the agent's route");
    const hookName = node.def.decide;
    if (hookName !== undefined) {
      const hook = this.o.decideHooks[hookName];
      if (!hook)
        return { reason: "invalid_next", message: `decide hook "${hookName}" is not registered with this engine` };
      try {
        const ctx = await this.context(t, graph, output);
        const chosen = await hook(output, { input: t.input, run_id: t.run_id, node_id: t.node_id, nodes: ctx.nodes });
        return checked(typeof chosen === "string" ? [chosen] : [...chosen], `decide hook "${hookName}"`);
      } catch (e) {
        return { reason: "invalid_next", message: `decide hook "${hookName}" threw: ${errorOf(e).message}` };
      }
    }
    const cases = node.successCases;
    if (!cases) return { decision: { kind: "targets", targets: [] } };
    if (cases.every((c) => c.when === null))
      return { decision: { kind: "targets", targets: [...node.successTargets] } };
    const ctx = await this.context(t, graph, output);
    for (const c of cases) {
      try {
        if (c.when === null || (await c.when.test(ctx))) return checked(c.to, "the matching case");
      } catch (e) {
        return { reason: "when_error", message: errorOf(e).message };
      }
    }
    return { decision: { kind: "none" } };
  }

  /** Resolves a ready visit's payload templates once; the dispatcher stores the result. */
  resolvePayload(key: VisitKey, known?: RunRef): void {
    const id = `${key.run_id}:${key.node_id}:${key.visit}`;
    if (this.resolving.has(id)) return;
    this.resolving.add(id);
    let marks: Markers | null = null;
    void (async (): Promise<Input> => {
      try {
        const run = known ?? (await this.o.store.getRun(key.run_id));
        if (!run) throw new Error(`run ${key.run_id} vanished`);
        const { graph } = await this.o.registry.get(run.workflow_id, run.workflow_version);
        const node = graph.nodes.get(key.node_id);
        const written = (node?.def.payload ?? {}) as Record<string, Json>;
        const template = node?.payload;
        const concurrency = node?.concurrency ?? null;
        const keyTemplate = concurrency && typeof concurrency.key !== "string" ? concurrency.key : null;
        const fixedKey = typeof concurrency?.key === "string" ? concurrency.key : null;
        if (!template && !keyTemplate) return { kind: "payload", key, payload: written, concurrency_key: fixedKey };
        // A map item's run has one node and no loop: no visit of it has ended before its payload resolves.
        const ctx = await this.context(run, graph, undefined, run.parent?.item === undefined);
        let concurrencyKey = fixedKey;
        if (keyTemplate) {
          const value = await keyTemplate.resolve(ctx);
          if (value === undefined || value === null) {
            const message = `concurrency.key of node ${key.node_id} gave no value; make its template give a string for every run`;
            return { kind: "payload_error", key, error: { message, reason: "template_error" } };
          }
          concurrencyKey = typeof value === "string" ? value : JSON.stringify(value);
        }
        if (!template) return { kind: "payload", key, payload: written, concurrency_key: concurrencyKey };
        // An agent of this engine would run it: a secret it lacks fails the visit now (a worker has its own).
        const missing = this.o.handlers.has(node.agent_type)
          ? template.secretNames.find((name) => !this.o.secrets.has(name))
          : undefined;
        if (missing !== undefined) {
          return { kind: "payload_error", key, error: { message: notConfigured(missing), reason: "template_error" } };
        }
        // Templates see markers, never values; what is stored holds "[secret NAME]" (engine/attempts/secrets.ts).
        marks = template.secretNames.length > 0 ? markers(template.secretNames) : null;
        const raw = await template.resolve(marks ? { ...ctx, secrets: marks.secrets } : ctx);
        const sealed = marks ? seal(raw, marks, template.secretUses) : { value: raw };
        if ("problem" in sealed)
          return { kind: "payload_error", key, error: { message: sealed.problem, reason: "template_error" } };
        const resolved = sealed.value;
        // Fields the kind resolves later (a map's `each`) are kept as written.
        for (const field of node.kind.deferred ?? []) {
          if (field in written) (resolved as Record<string, unknown>)[field] = written[field];
        }
        const payload = this.checkJson(resolved, "payload");
        if (!payload.ok)
          return { kind: "payload_error", key, error: { message: payload.problem, reason: "template_error" } };
        // The node's kind may refuse what the templates gave (a review's assignees, a sleep's time).
        const refused = graph.nodes.get(key.node_id)?.kind.checkResolved?.(payload.value) ?? null;
        if (refused) return { kind: "payload_error", key, error: { message: refused, reason: "template_error" } };
        return { kind: "payload", key, payload: payload.value, concurrency_key: concurrencyKey };
      } catch (e) {
        // An expression's error may quote a marker (`$number(secrets.X)`): never stored as such.
        const message = marks ? unmark(errorOf(e).message, marks) : errorOf(e).message;
        return { kind: "payload_error", key, error: { message, reason: "template_error" } };
      }
    })().then((input) => {
      this.resolving.delete(id);
      this.o.submit(input);
    });
  }

  /**
   * A compensation's payload: its templates see `self` (the undone visit's execution_id, output
   * and error). Resolved at each attempt: the run has ended, so every attempt sees the same.
   */
  async compensationPayload(t: ClaimedTask): Promise<Json> {
    const { graph } = await this.o.registry.get(t.workflow_id, t.workflow_version);
    const node = graph.nodes.get(t.node_id);
    const template = node?.compensationPayload;
    if (!template) return (node?.def.compensation?.payload ?? {}) as Json;
    let value: unknown;
    try {
      const ctx = await this.context(t, graph);
      value = await template.resolve({ ...ctx, self: t.compensates });
    } catch (e) {
      throw new NonRetryableError(`compensation payload of ${t.node_id}: ${errorOf(e).message}`);
    }
    const checked = this.checkJson(value, "payload");
    if (!checked.ok) throw new NonRetryableError(`compensation payload of ${t.node_id}: ${checked.problem}`);
    return checked.value;
  }

  /** What expressions see: input, the latest terminal visit of every node, run, and `output`. */
  private async context(
    t: { run_id: string; trace_id: string; input: Json; parent?: RunParent | null },
    graph: WorkflowGraph,
    output?: Json,
    readNodes = true,
  ): Promise<ExpressionContext> {
    const nodes: ExpressionContext["nodes"] = {};
    for (const id of graph.order) nodes[id] = null;
    for (const v of readNodes ? await this.o.store.latestTerminalVisits(t.run_id) : []) {
      nodes[v.node_id] = { output: v.output, status: v.state, error: v.error };
    }
    return {
      input: t.input,
      nodes,
      run: { run_id: t.run_id, trace_id: t.trace_id },
      // A map item's run: its input is the item (DESIGN §11.1: `each` templates see item and index).
      ...(t.parent?.item !== undefined ? { item: t.input, index: t.parent.item } : {}),
      ...(output !== undefined ? { output } : {}),
    };
  }

  /** The value as it will be stored, or why it cannot be stored. */
  private checkJson(value: unknown, what: string): { ok: true; value: Json } | { ok: false; problem: string } {
    const problem = jsonProblem(value, what);
    if (problem) {
      return {
        ok: false,
        problem: `the ${what} is not JSON: ${problem}; use plain objects, arrays, strings, numbers, booleans or null`,
      };
    }
    const text = JSON.stringify(value);
    if (Buffer.byteLength(text) > this.o.maxOutputBytes) {
      return {
        ok: false,
        problem: `the ${what} is ${Buffer.byteLength(text)} bytes, over the limit of ${this.o.maxOutputBytes}; store large data elsewhere and pass a reference`,
      };
    }
    return { ok: true, value: JSON.parse(text) as Json };
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

function isNonRetryable(e: unknown): boolean {
  return e instanceof NonRetryableError || (e instanceof Error && e.name === "NonRetryableError");
}

/** A built-in agent's NonRetryableError may name its reason (`invalid_output` for an http body over the limit). */
function nonRetryableReason(e: Error): string {
  const reason = (e as { reason?: unknown }).reason;
  return e instanceof NonRetryableError && typeof reason === "string" ? reason : "non_retryable";
}

function errorOf(e: unknown): VisitError {
  if (e instanceof Error) {
    const error: VisitError = {
      message: e.message || e.name,
      reason: isNonRetryable(e) ? nonRetryableReason(e) : "error",
      name: e.name,
    };
    if (e instanceof RetryableError && e.retryAfterMs !== undefined) error.retry_after_ms = e.retryAfterMs;
    return error;
  }
  return { message: typeof e === "string" ? e : `handler threw a non-Error value: ${safeString(e)}`, reason: "error" };
}

function safeString(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
