/**
 * Validation of a workflow definition (DESIGN §2): the schema first, then the graph and
 * expression checks, reporting every problem at once with its path.
 */

import { type Problem, ValidationError } from "../errors.js";
import type { Json } from "../json-text.js";
import { checkStructure } from "./check-structure.js";
import { type CompiledPayload, compilePayload, compileWhen } from "./expressions.js";
import { compileGraph, type WorkflowGraph } from "./graph.js";
import { BUILTIN_KINDS, kindOf, secretsRefusal } from "./kinds/index.js";
import { dueTime, sleep } from "./kinds/sleep.js";
import { salvage } from "./salvage.js";
import { type NodeDefinition, type WorkflowDefinition, WorkflowSchema } from "./schema.js";
import { nearest } from "./suggest.js";
import {
  buildTopology,
  dependsOnRefs,
  failureRefs,
  reachable,
  reverse,
  successCases,
  type Topology,
} from "./topology.js";
import { triggerProblems } from "./triggers.js";
import { issuesToProblems } from "./zod-issues.js";

export interface ValidateOptions {
  /** Agent types with a handler; others get a warning. Built-ins are always known. Default: no check. */
  knownAgentTypes?: Iterable<string>;
  /** Registered `decide` hooks; a node naming another one is an error. Default: no check. */
  decideHooks?: Iterable<string>;
  /**
   * When a run would start, ms since the epoch: a sleep `until` a fixed time further than the
   * workflow's timeout from it gets a warning. @defaultValue Date.now()
   */
  now?: number;
  /** The engine's output limit, kept by the compiled graph's inline aggregators. @defaultValue 1 MiB */
  maxOutputBytes?: number;
  /**
   * @internal The document was accepted when it was stored: a rule added since that fails
   * closed at run time (review assignees) does not refuse it, so its runs stay readable.
   */
  stored?: boolean;
}

export type ValidationResult =
  | {
      ok: true;
      workflow: WorkflowDefinition;
      /** @internal the compiled graph, for the engine */
      graph: WorkflowGraph;
      errors: [];
      warnings: Problem[];
    }
  | { ok: false; errors: Problem[]; warnings: Problem[] };

/**
 * Checks a workflow definition and compiles its graph.
 * @example
 * const result = validateWorkflow(JSON.parse(text), { knownAgentTypes: ["collector"] });
 * if (!result.ok) for (const p of result.errors) console.error(`${p.path}: ${p.message}`);
 */
export function validateWorkflow(json: unknown, options: ValidateOptions = {}): ValidationResult {
  const parsed = WorkflowSchema.safeParse(json, { reportInput: true });
  if (!parsed.success) {
    // The graph and expression checks still run on what is well-formed enough, so a cycle or
    // an unknown node is reported with the schema's problems, not after they are fixed.
    const errors = issuesToProblems(parsed.error.issues, "", WorkflowSchema);
    const salvaged = salvage(json);
    if (!salvaged) return { ok: false, errors, warnings: [] };
    const more = checkDefinition(salvaged, options);
    const failed = new Set(errors.map((e) => e.path));
    return {
      ok: false,
      errors: dedupe([...errors, ...more.errors]),
      warnings: more.warnings.filter((w) => !failed.has(w.path)),
    };
  }
  const def = parsed.data;
  const { errors, warnings } = checkDefinition(def, options);
  if (errors.length > 0) return { ok: false, errors, warnings };
  return {
    ok: true,
    workflow: def,
    graph: compileGraph(def, { maxOutputBytes: options.maxOutputBytes }),
    errors: [],
    warnings,
  };
}

/** Every check after the schema's: references, cases, templates, the graph's structure. */
function checkDefinition(
  def: WorkflowDefinition,
  options: ValidateOptions,
): { errors: Problem[]; warnings: Problem[] } {
  const errors: Problem[] = [];
  const warnings: Problem[] = [];
  const topo = buildTopology(def);
  const ctx: Checks = { def, topo, errors, warnings, ancestors: ancestorsOf(topo) };

  def.nodes.forEach((node, i) => {
    checkIdentity(ctx, node, i);
    checkReferences(ctx, node, i);
    checkCases(ctx, node, i);
    checkTemplates(ctx, node, i);
    checkKind(ctx, node, i, options);
    checkHooksAndAgents(ctx, node, i, options);
    checkTimeout(ctx, node, i);
    checkSleep(ctx, node, i, options.now ?? Date.now());
  });
  checkStructure(def, topo, errors);
  checkDefaultsTimeout(ctx);
  errors.push(...triggerProblems(def));
  return { errors, warnings: dedupe(warnings) };
}

/** One warning per path and message (a template reading a node twice warns once). */
function dedupe(problems: Problem[]): Problem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const key = `${p.path}\n${p.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * Like `validateWorkflow`, for callers that stop at the first invalid definition.
 * @throws ValidationError listing every error.
 */
export function parseWorkflowOrThrow(
  json: unknown,
  options: ValidateOptions = {},
): { workflow: WorkflowDefinition; graph: WorkflowGraph; warnings: Problem[] } {
  const result = validateWorkflow(json, options);
  if (!result.ok) throw new ValidationError("Workflow definition is invalid", result.errors);
  return { workflow: result.workflow, graph: result.graph, warnings: result.warnings };
}

interface Checks {
  def: WorkflowDefinition;
  topo: Topology;
  errors: Problem[];
  warnings: Problem[];
  /** Per node index: the indices that reach it through depends_on and forward edges. */
  ancestors: (index: number) => Set<number>;
}

function ancestorsOf(topo: Topology): (index: number) => Set<number> {
  const upstream = reverse(topo.flow);
  const cache = new Map<number, Set<number>>();
  return (index) => {
    let set = cache.get(index);
    if (!set) {
      set = reachable(upstream[index] ?? [], upstream);
      cache.set(index, set);
    }
    return set;
  };
}

function checkIdentity(c: Checks, node: NodeDefinition, i: number): void {
  const first = c.topo.indexOf.get(node.node_id);
  if (first !== undefined && first !== i) {
    c.errors.push({
      path: `nodes[${i}].node_id`,
      message: `duplicate node id "${node.node_id}": nodes[${first}] already uses it`,
    });
  }
}

function checkReferences(c: Checks, node: NodeDefinition, i: number): void {
  const refs = [
    ...dependsOnRefs(node, i),
    ...(successCases(node, i) ?? []).flatMap((k) => k.to),
    ...failureRefs(node, i),
  ];
  for (const ref of refs) {
    if (!c.topo.indexOf.has(ref.id)) c.errors.push(unknownNode(c, ref.path, ref.id));
  }
}

function unknownNode(c: Checks, path: string, id: string): Problem {
  // Only suggest for ids long enough that a near miss is likely a typo, not another node.
  const limit = Math.min(2, Math.floor(id.length / 3));
  const near = nearest(id, c.topo.indexOf.keys(), limit);
  const hint = near === undefined ? "" : ` (did you mean "${near}"?)`;
  return { path, message: `unknown node "${id}"${hint}` };
}

function checkCases(c: Checks, node: NodeDefinition, i: number): void {
  const cases = successCases(node, i) ?? [];
  const isCaseList = Array.isArray(node.next_on_success) && node.next_on_success.some((x) => typeof x === "object");
  if (isCaseList) {
    const defaults = cases.filter((k) => k.when === undefined);
    defaults.forEach((k, n) => {
      if (n > 0) {
        c.errors.push({ path: k.path, message: 'only one default case (without "when") is allowed' });
      } else if (k !== cases[cases.length - 1]) {
        c.errors.push({
          path: k.path,
          message: 'the default case (without "when") must be the last case: the cases after it could never be chosen',
        });
      }
    });
    if (defaults.length === 0) {
      c.warnings.push({
        path: `nodes[${i}].next_on_success`,
        message:
          'no default case (without "when"): when no case holds, no edge fires and the branch ends (branch.none)',
      });
    }
  }
  for (const k of cases) {
    if (k.when === undefined) continue;
    const path = `${k.path}.when`;
    const { when, problems } = compileWhen(k.when, path);
    c.errors.push(...problems);
    const reads = when?.readsNodes.map((node_id) => ({ path, node_id })) ?? [];
    checkReads(c, i, reads, true);
  }
}

function checkTemplates(c: Checks, node: NodeDefinition, i: number): void {
  const secretsRefused = secretsRefusal(kindOf(node.agent_type));
  checkPayload(c, i, compilePayload(node.payload, `nodes[${i}].payload`, { secretsRefused }), false);
  if (node.compensation) {
    const path = `nodes[${i}].compensation.payload`;
    checkPayload(c, i, compilePayload(node.compensation.payload, path), true);
  }
}

function checkPayload(
  c: Checks,
  i: number,
  compiled: { template: CompiledPayload | null; problems: Problem[] },
  selfAllowed: boolean,
): void {
  c.errors.push(...compiled.problems);
  if (compiled.template) checkReads(c, i, compiled.template.reads, selfAllowed);
}

/** Warns about reads of nodes that need not have run yet: their value may be null. */
function checkReads(
  c: Checks,
  i: number,
  reads: readonly { path: string; node_id: string }[],
  selfAllowed: boolean,
): void {
  const self = c.def.nodes[i]?.node_id;
  for (const read of reads) {
    const j = c.topo.indexOf.get(read.node_id);
    if (j === undefined) {
      c.warnings.push({
        path: read.path,
        message: `reads nodes.${read.node_id}, but there is no node "${read.node_id}"`,
      });
    } else if (!(selfAllowed && read.node_id === self) && !c.ancestors(i).has(j)) {
      c.warnings.push({
        path: read.path,
        message: `reads nodes.${read.node_id}, but "${read.node_id}" is not an ancestor of "${self}" (through depends_on and forward edges): its value may be null or from an earlier loop round`,
      });
    }
  }
}

/** What the node's kind (DESIGN §11) requires of it: an aggregator's sources, a review's assignees, ... */
function checkKind(c: Checks, node: NodeDefinition, i: number, options: ValidateOptions): void {
  const checks = {
    at: `nodes[${i}]`,
    stored: options.stored === true,
    unknownNode: (path: string, id: string) => (c.topo.indexOf.has(id) ? null : unknownNode(c, path, id)),
  };
  c.errors.push(...(kindOf(node.agent_type).validate?.(node, checks) ?? []));
}

function checkHooksAndAgents(c: Checks, node: NodeDefinition, i: number, options: ValidateOptions): void {
  if (options.decideHooks !== undefined && node.decide !== undefined) {
    const hooks = [...options.decideHooks];
    if (!hooks.includes(node.decide)) {
      const list = hooks.length > 0 ? `registered hooks: ${hooks.join(", ")}` : "no hooks are registered";
      c.errors.push({ path: `nodes[${i}].decide`, message: `unknown decide hook "${node.decide}" (${list})` });
    }
  }
  if (options.knownAgentTypes === undefined) return;
  const known = new Set([...options.knownAgentTypes, ...BUILTIN_KINDS]);
  const check = (path: string, type: string) => {
    if (!known.has(type)) {
      const near = nearest(type, known);
      const hint = near === undefined ? "" : ` (did you mean "${near}"?)`;
      c.warnings.push({
        path,
        message: `no agent is registered for agent_type "${type}"${hint}: its visits wait until an engine with a handler for it, or a worker, claims them`,
      });
    }
  };
  check(`nodes[${i}].agent_type`, node.agent_type);
  if (node.compensation) check(`nodes[${i}].compensation.agent_type`, node.compensation.agent_type);
  for (const named of kindOf(node.agent_type).agentTypesIn?.(node.payload as Json) ?? []) {
    check(`nodes[${i}].payload.${named.path}`, named.agent_type);
  }
}

/** The way out of every "reaches past the run's TTL" warning. */
const RAISE = "raise the workflow's timeout (the run's time to live) above it";

/**
 * A node's timeout the run cannot reach: the run expires first (run_timeout), so its own
 * timeout (event_timeout, review_timeout, an attempt's) never fires.
 */
function checkTimeout(c: Checks, node: NodeDefinition, i: number): void {
  if (node.timeout === undefined || node.timeout < c.def.timeout) return;
  const kind = kindOf(node.agent_type).name;
  const what =
    kind === "wait_event"
      ? `waits up to ${node.timeout} s for its event`
      : kind === "human_review"
        ? `the review waits up to ${node.timeout} s`
        : `timeout ${node.timeout} s`;
  c.warnings.push({
    path: `nodes[${i}].timeout`,
    message: `${what}, at or above the workflow timeout (${c.def.timeout} s): the run expires first; ${RAISE}, or lower this one`,
  });
}

/** A sleep of constant `seconds` (or `until` a fixed time) that wakes only after the run expired. */
function checkSleep(c: Checks, node: NodeDefinition, i: number, now: number): void {
  if (kindOf(node.agent_type) !== sleep) return;
  const p = node.payload;
  const field = "seconds" in p ? "seconds" : "until";
  if (typeof p[field] === "string" && (p[field] as string).includes("{{")) return; // known only when it resolves
  const wakes = dueTime(p as Json, now);
  const ttlEnds = now + c.def.timeout * 1000;
  if (typeof wakes === "string" || wakes < ttlEnds) return; // a bad payload is the kind's error
  const message =
    field === "seconds"
      ? `sleeps ${String(p.seconds)} s, at or above the workflow timeout (${c.def.timeout} s): the run expires before it wakes; ${RAISE}`
      : `sleeps until ${new Date(wakes).toISOString()}, more than the workflow timeout (${c.def.timeout} s) from now: a run started now expires before it wakes; ${RAISE}`;
  c.warnings.push({ path: `nodes[${i}].payload.${field}`, message });
}

function checkDefaultsTimeout(c: Checks): void {
  const t = c.def.defaults.timeout;
  if (t !== undefined && t >= c.def.timeout) {
    c.warnings.push({
      path: "defaults.timeout",
      message: `timeout ${t} s is at or above the workflow timeout (${c.def.timeout} s): the run expires first; ${RAISE}, or lower this one`,
    });
  }
}
