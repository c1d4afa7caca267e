/**
 * The static facts the scheduler needs (DESIGN §4), computed once per workflow version so that
 * readiness stays incremental: who is gated, who depends on whom, what a terminal visit can
 * change, and what a loop-back resets.
 */
import { ValidationError } from "../errors.js";
import { type CompiledPayload, type CompiledWhen, compilePayload, compileWhen, type SecretUse } from "./expressions.js";
import { type KindRules, kindOf, secretsRefusal, undoAgent } from "./kinds/index.js";
import { BUILTIN_DEFAULTS, type NodeDefinition, type WorkflowDefinition } from "./schema.js";
import { buildTopology, reachable, successCases } from "./topology.js";

/** A node with its effective settings and its place in the graph. */
export interface CompiledNode {
  readonly id: string;
  /** Position in `nodes`: edges to a higher index are forward, others loop back. */
  readonly index: number;
  readonly def: NodeDefinition;
  readonly agent_type: string;
  /** What a visit of it does: the built-in kind of its agent_type, else `task`. */
  readonly kind: KindRules;
  /** Effective settings: node value, else `defaults`, else the built-in default. */
  readonly retry_count: number;
  readonly retry_interval: number;
  readonly retry_backoff: "fixed" | "exponential";
  readonly retry_max_interval: number;
  readonly retry_jitter: "none" | "full";
  /** When its retries run out: the visit fails, or the run pauses for an operator (DESIGN §16). */
  readonly on_exhausted: "fail" | "pause";
  /** Seconds; for a kind without retries (`human_review`), how long it waits (node value or workflow timeout). */
  readonly timeout: number;
  readonly heartbeat_timeout: number | null;
  readonly max_visits: number;
  readonly join: "all" | "any" | "all_done";
  readonly depends_on: string[];
  /** null when `next_on_success` is absent; a plain id or list is one case without `when`. */
  readonly successCases: { when: CompiledWhen | null; to: string[] }[] | null;
  /** Union of all declared success targets (a route or hook may only pick among them). */
  readonly successTargets: string[];
  readonly failureTargets: string[];
  /** null when the payload holds no template. */
  readonly payload: CompiledPayload | null;
  /** Where its payload's templates read `secrets.NAME` (DESIGN §12): filled in at dispatch only there. */
  readonly secretUses: readonly SecretUse[];
  /** The secret names its payload reads. */
  readonly secretNames: readonly string[];
  /** null when there is no compensation or its payload holds no template. */
  readonly compensationPayload: CompiledPayload | null;
  /** The node's `concurrency`, its key compiled (a template resolved once per visit, with the payload), or null. */
  readonly concurrency: { key: CompiledPayload | string; limit: number } | null;
  /** Nodes whose outputs it reads (an aggregator's `payload.sources`, else depends_on); empty for other kinds. */
  readonly sources: string[];
  /** True when some forward edge names it: it runs only once activated. */
  readonly gated: boolean;
  /** Sources of the forward edges into it. */
  readonly incomingForward: string[];
  /** Nodes whose depends_on lists it. */
  readonly dependents: string[];
  /**
   * Nodes whose readiness or skip can change when a visit of this node becomes terminal: its
   * dependents and its forward targets. Skips cascade by applying `affected` again to every
   * node that became terminal; loop-backs are handled through `regions`.
   */
  readonly affected: string[];
  readonly loopBackTargets: string[];
}

export interface WorkflowGraph {
  /** In document order. */
  readonly nodes: Map<string, CompiledNode>;
  readonly order: string[];
  /** For every loop-back target T: T and every node reachable from it through depends_on and forward edges, in document order. */
  readonly regions: Map<string, string[]>;
  /** Nodes nothing depends on and no forward edge leaves: their outputs form the run output. */
  readonly sinks: string[];
  /** Free nodes with no dependencies: ready when the run starts. */
  readonly startNodes: string[];
  /** The run's TTL in seconds (the workflow's `timeout`). */
  readonly timeout: number;
  /** Some node declares `compensation`: a failed run of this workflow may have work to undo. */
  readonly compensates: boolean;
  /**
   * Largest output, in bytes of JSON, of an aggregator that runs inline (in the scheduler): the
   * limit of every agent's output (the engine's `maxPayloadBytes`), which its sources each kept.
   */
  readonly maxOutputBytes: number;
  /** True when an edge from `from` to `to` is forward (`to` listed later). */
  isForward(from: string, to: string): boolean;
}

/** The engine's limits a compiled graph keeps. */
export interface GraphLimits {
  /** The engine's `maxPayloadBytes`. @defaultValue 1 MiB */
  maxOutputBytes?: number;
}

export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;

/**
 * Compiles a definition that already passed `validateWorkflow`.
 * @throws ValidationError when a template or `when` does not parse (an unvalidated definition).
 */
export function compileGraph(def: WorkflowDefinition, limits: GraphLimits = {}): WorkflowGraph {
  const topo = buildTopology(def);
  const ids = def.nodes.map((n) => n.node_id);
  const names = (indices: readonly number[] = []) => [...indices].sort((a, b) => a - b).map((i) => ids[i] as string);
  const problems: { path: string; message: string }[] = [];

  const nodes = new Map<string, CompiledNode>();
  def.nodes.forEach((node, index) => {
    const cases = successCases(node, index);
    const compiledCases =
      cases?.map((c) => {
        const when = c.when === undefined ? null : compileWhen(c.when, `${c.path}.when`);
        if (when) problems.push(...when.problems);
        return { when: when?.when ?? null, to: c.to.map((r) => r.id) };
      }) ?? null;
    const kind = kindOf(node.agent_type);
    const payload = compilePayload(withoutDeferred(node.payload, kind), `nodes[${index}].payload`, {
      secretsRefused: secretsRefusal(kind),
    });
    const compensation = node.compensation
      ? compilePayload(node.compensation.payload, `nodes[${index}].compensation.payload`)
      : { template: null, problems: [] };
    const concurrency = node.concurrency ?? kind.impliedConcurrency?.(node) ?? null;
    const concurrencyKey = concurrency
      ? compilePayload(concurrency.key, `nodes[${index}].concurrency.key`)
      : { template: null, problems: [] };
    problems.push(...payload.problems, ...compensation.problems, ...concurrencyKey.problems);
    const failureTargets = node.next_on_failure === undefined ? [] : [node.next_on_failure].flat();
    nodes.set(node.node_id, {
      id: node.node_id,
      index,
      def: node,
      agent_type: node.agent_type,
      kind,
      ...effectiveSettings(node, def, kind),
      join: node.join,
      depends_on: [...new Set(node.depends_on)],
      successCases: compiledCases,
      successTargets: [...new Set(compiledCases?.flatMap((c) => c.to) ?? [])],
      failureTargets: [...new Set(failureTargets)],
      payload: payload.template,
      secretUses: payload.template?.secretUses ?? [],
      secretNames: payload.template?.secretNames ?? [],
      compensationPayload: compensation.template,
      concurrency: concurrency ? { key: concurrencyKey.template ?? concurrency.key, limit: concurrency.limit } : null,
      sources: kind.sources?.(node) ?? [],
      gated: (topo.forwardIn[index]?.length ?? 0) > 0,
      incomingForward: names(topo.forwardIn[index]),
      dependents: names(topo.dependents[index]),
      affected: names(topo.flow[index]),
      loopBackTargets: names(topo.loopBack[index]),
    });
  });
  if (problems.length > 0) throw new ValidationError("Workflow definition is invalid", problems);

  const regions = new Map<string, string[]>();
  for (const targets of topo.loopBack) {
    for (const t of targets) {
      const id = ids[t] as string;
      if (!regions.has(id)) regions.set(id, names([...reachable([t], topo.flow)]));
    }
  }
  const all = [...nodes.values()];
  return {
    nodes,
    order: ids,
    regions,
    sinks: all.filter((n) => n.dependents.length === 0 && (topo.forward[n.index]?.length ?? 0) === 0).map((n) => n.id),
    startNodes: all.filter((n) => !n.gated && n.depends_on.length === 0).map((n) => n.id),
    timeout: def.timeout,
    compensates: all.some((n) => undoAgent(n) !== null),
    maxOutputBytes: limits.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES,
    isForward(from, to) {
      const a = topo.indexOf.get(from);
      const b = topo.indexOf.get(to);
      return a !== undefined && b !== undefined && b > a;
    },
  };
}

type Settings = Pick<
  CompiledNode,
  | "retry_count"
  | "retry_interval"
  | "retry_backoff"
  | "retry_max_interval"
  | "retry_jitter"
  | "on_exhausted"
  | "timeout"
  | "heartbeat_timeout"
  | "max_visits"
>;

function effectiveSettings(node: NodeDefinition, def: WorkflowDefinition, kind: KindRules): Settings {
  const d = def.defaults;
  const b = BUILTIN_DEFAULTS;
  const shared = {
    heartbeat_timeout: node.heartbeat_timeout ?? d.heartbeat_timeout ?? b.heartbeat_timeout,
    max_visits: node.max_visits ?? d.max_visits ?? b.max_visits,
  };
  if (!kind.retries) {
    // A review (or a wait) waits for a person or a time, not for an agent: no retries (DESIGN
    // §5), and `defaults`, written for agent attempts, do not apply to its timeout or retry fields.
    return {
      ...shared,
      retry_count: 0,
      retry_interval: node.retry_interval ?? b.retry_interval,
      retry_backoff: node.retry_backoff ?? b.retry_backoff,
      retry_max_interval: node.retry_max_interval ?? b.retry_max_interval,
      retry_jitter: node.retry_jitter ?? b.retry_jitter,
      on_exhausted: b.on_exhausted,
      timeout: node.timeout ?? def.timeout,
    };
  }
  return {
    ...shared,
    retry_count: node.retry_count ?? d.retry_count ?? b.retry_count,
    retry_interval: node.retry_interval ?? d.retry_interval ?? b.retry_interval,
    retry_backoff: node.retry_backoff ?? d.retry_backoff ?? b.retry_backoff,
    retry_max_interval: node.retry_max_interval ?? d.retry_max_interval ?? b.retry_max_interval,
    retry_jitter: node.retry_jitter ?? d.retry_jitter ?? b.retry_jitter,
    on_exhausted: node.on_exhausted ?? d.on_exhausted ?? b.on_exhausted,
    timeout: node.timeout ?? d.timeout ?? b.timeout,
  };
}

/** The payload without the fields its kind resolves later (`KindRules.deferred`). */
function withoutDeferred(payload: NodeDefinition["payload"], kind: KindRules): NodeDefinition["payload"] {
  if (!kind.deferred) return payload;
  const rest = { ...payload };
  for (const field of kind.deferred) delete rest[field];
  return rest;
}
