/**
 * The workflow registry: validates definitions, stores each distinct content once as a new
 * version, and keeps compiled graphs of the versions runs use.
 */
import type { Ajv, ValidateFunction } from "ajv";
import type { CompiledNode, WorkflowGraph } from "../definition/graph.js";
import { type AgentTool, agent as agentKind, type McpToolSet } from "../definition/kinds/agent.js";
import { kindOf } from "../definition/kinds/index.js";
import { ITEM_SEPARATOR, type MapPayload, map as mapKind } from "../definition/kinds/map.js";
import { workflow as workflowKind } from "../definition/kinds/workflow.js";
import type { WorkflowDefinition } from "../definition/schema.js";
import { type CompiledTrigger, compileTriggers, triggerEvents } from "../definition/triggers.js";
import { parseWorkflowOrThrow, type ValidateOptions, validateWorkflow } from "../definition/validate.js";
import type { WorkflowInput } from "../definition/workflow-input.js";
import { NotFoundError, type Problem, ValidationError } from "../errors.js";
import type { Store } from "../store/store.js";
import { refuseNul } from "./identifiers.js";
import { canonicalJson, sha256 } from "./json.js";
import type { Upgradable } from "./migrate.js";

export interface LoadedWorkflow {
  id: string;
  version: number;
  /** The definition as registered, with its version (what getWorkflow returns). */
  document: unknown;
  /** The parsed definition, defaults applied. */
  definition: WorkflowDefinition;
  graph: WorkflowGraph;
  /** Problems of a run input against `input_schema` (none when there is no schema). */
  checkInput(input: unknown): Problem[];
  /** Its `triggers` (DESIGN §17), compiled; empty when it declares none. */
  triggers: CompiledTrigger[];
}

export interface RegisteredWorkflow {
  id: string;
  version: number;
  /** False when the same content was already registered (its version is returned). */
  created: boolean;
  warnings: Problem[];
  /** The active runs of older versions, and how many could move to this one (Engine.migrateRuns). */
  upgradable: Upgradable;
}

/** What registering a definition would say, without storing it. */
export interface WorkflowCheck {
  /** True when registerWorkflow would accept the definition. */
  ok: boolean;
  /** Every problem that refuses it, with its path (none when ok). */
  errors: Problem[];
  /** What is accepted but worth a look (an agent type with no handler here, ...). */
  warnings: Problem[];
}

export class WorkflowRegistry {
  private readonly cache = new Map<string, LoadedWorkflow>();
  /** Versions whose derived workflows' rows this process has made sure of (`storeDerived`). */
  private readonly derivedStored = new Set<string>();
  /** Loaded on the first workflow with an input_schema: most never need it, and it is slow to import. */
  private ajv: Ajv | null = null;

  constructor(
    private readonly store: Store,
    private readonly options: {
      /** The agent types something serves (served-types.ts): others get a warning. */
      knownAgentTypes: () => Promise<Iterable<string>>;
      decideHooks: () => string[];
      maxOutputBytes: number;
      /** The engine's clock: a sleep until a fixed time is judged against a run started now. */
      now: () => number;
      /** What the engine's configuration refuses of a valid workflow (its secrets' owners and hosts). */
      engineProblems?: (workflow: WorkflowDefinition, graph: WorkflowGraph) => Problem[];
    },
  ) {}

  /** Stores the definition; the engine adds `upgradable` (engine/migrate.ts). */
  async register(json: unknown, now: number): Promise<Omit<RegisteredWorkflow, "upgradable">> {
    const { workflow, graph, warnings } = parseWorkflowOrThrow(json, await this.validateOptions());
    const refused = this.options.engineProblems?.(workflow, graph) ?? [];
    if (refused.length > 0) throw new ValidationError("Workflow definition is invalid", refused);
    const checkInput = await this.compileInputSchema(workflow);
    const literal = literalInputProblems(workflow, checkInput);
    if (literal.length > 0) throw new ValidationError("Workflow definition is invalid", literal);
    // The version is the registry's to assign: content without it decides identity.
    const { version: _ignored, ...content } = json as Record<string, unknown>;
    // Stored in the author's key order (the editor and `skein workflows get` show it back as
    // written); identity is the canonical text's hash, so the same content in another key order
    // is the same version, kept as first written.
    const text = JSON.stringify(content);
    const hash = sha256(canonicalJson(content));
    const { version, created } = await this.store.putWorkflow(workflow.id, hash, text, now, triggerEvents(workflow));
    await this.putItemWorkflows(graph, workflow.id, version, now);
    // Content already registered keeps its first text: `get` reads that one when it is asked for.
    if (created) {
      this.cache.set(key(workflow.id, version), {
        id: workflow.id,
        version,
        document: { ...(JSON.parse(text) as Record<string, unknown>), version },
        definition: workflow,
        graph,
        checkInput,
        triggers: compileTriggers(workflow),
      });
    }
    return { id: workflow.id, version, created, warnings: [...warnings, ...(await this.childWarnings(workflow))] };
  }

  /**
   * `workflow` nodes naming a workflow that is not registered (yet): a warning, not an error,
   * since workflows may be registered in any order (the visit fails `unknown_workflow` if it
   * still is not when it runs). A workflow may name itself.
   */
  private async childWarnings(workflow: WorkflowDefinition): Promise<Problem[]> {
    const warnings: Problem[] = [];
    for (const [i, node] of workflow.nodes.entries()) {
      if (kindOf(node.agent_type) !== workflowKind) continue;
      const id = (node.payload as { workflow_id?: unknown }).workflow_id;
      if (typeof id !== "string" || id.includes("{{") || id === workflow.id) continue;
      if (await this.store.getWorkflow(id)) continue;
      warnings.push({
        path: `nodes[${i}].payload.workflow_id`,
        message: `workflow "${id}" is not registered yet: register it before this node runs, or the visit fails (unknown_workflow)`,
      });
    }
    return warnings;
  }

  /** The checks of `register` (the definition, then its input_schema), as a result: nothing is stored. */
  async check(json: unknown): Promise<WorkflowCheck> {
    const result = validateWorkflow(json, await this.validateOptions());
    if (!result.ok) return { ok: false, errors: result.errors, warnings: result.warnings };
    const refused = this.options.engineProblems?.(result.workflow, result.graph) ?? [];
    if (refused.length > 0) return { ok: false, errors: refused, warnings: result.warnings };
    let checkInput: (input: unknown) => Problem[];
    try {
      checkInput = await this.compileInputSchema(result.workflow);
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      return { ok: false, errors: e.problems, warnings: result.warnings };
    }
    const literal = literalInputProblems(result.workflow, checkInput);
    if (literal.length > 0) return { ok: false, errors: literal, warnings: result.warnings };
    return { ok: true, errors: [], warnings: result.warnings };
  }

  private async validateOptions(): Promise<ValidateOptions> {
    return {
      knownAgentTypes: await this.options.knownAgentTypes(),
      decideHooks: this.options.decideHooks(),
      maxOutputBytes: this.options.maxOutputBytes,
      now: this.options.now(),
    };
  }

  /** A version already loaded, without waiting (a claimed task's: its flush loaded it), else undefined. */
  cached(id: string, version: number): LoadedWorkflow | undefined {
    return this.cache.get(key(id, version));
  }

  /** Engine.getWorkflow: a version's document as registered (latest by default). @throws NotFoundError */
  async stored(id: string, version?: number): Promise<{ id: string; version: number; definition: WorkflowInput }> {
    refuseNul({ workflow_id: id });
    const w = await this.get(id, version);
    return { id, version: w.version, definition: w.document as WorkflowInput };
  }

  /** The given version, or the latest. @throws NotFoundError */
  async get(id: string, version?: number): Promise<LoadedWorkflow> {
    if (id.includes(ITEM_SEPARATOR)) return this.itemWorkflow(id, version);
    // The latest version is asked of the store each time (another process may have registered
    // one), but only its number: the definition is read and parsed once per version.
    const wanted = version ?? (await this.store.latestWorkflowVersion(id)) ?? undefined;
    if (wanted !== undefined) {
      const hit = this.cache.get(key(id, wanted));
      if (hit) return hit;
    }
    const stored = wanted === undefined ? null : await this.store.getWorkflow(id, wanted);
    if (!stored) {
      throw new NotFoundError(
        version === undefined
          ? `workflow "${id}" is not registered; register it first with registerWorkflow (or skein workflows put)`
          : `workflow "${id}" has no version ${version}`,
      );
    }
    const document: unknown = JSON.parse(stored.definition);
    const { workflow, graph } = parseWorkflowOrThrow(document, {
      maxOutputBytes: this.options.maxOutputBytes,
      stored: true,
    });
    const loaded = {
      id,
      version: stored.version,
      document,
      definition: workflow,
      graph,
      checkInput: await this.compileInputSchema(workflow),
      triggers: compileTriggers(workflow),
    };
    this.cache.set(key(id, stored.version), loaded);
    return loaded;
  }

  /**
   * The one-node workflow a `map` node's items run (`<workflow_id>/<node_id>`, at the parent's
   * version): its node is the map's `each`, with the map node's retry settings and timeout. It is
   * made from the parent's definition (the row `register` stores for it is what runs refer to).
   * Items of `each: { workflow_id }` run that workflow itself; their item workflow (a `workflow`
   * node) holds `each` compiled, resolved per item (map-item-runs.ts), and is what item runs
   * started by earlier versions (two levels) still run. An agent tool's (`<workflow_id>/<node_id>/
   * <tool>`) is a node of the tool's agent, run when no agent of the calling engine serves it.
   */
  private async itemWorkflow(id: string, version: number | undefined): Promise<LoadedWorkflow> {
    const [parentId = "", nodeId = "", toolName] = id.split(ITEM_SEPARATOR, 3);
    const what =
      toolName === undefined
        ? `map node "${nodeId}"`
        : `agent node "${nodeId}" with a tool ${toolName} that workers serve`;
    if (version === undefined) {
      throw new NotFoundError(
        `workflow "${id}" is the item workflow of ${what} of "${parentId}": start "${parentId}" instead`,
      );
    }
    const cached = this.cache.get(key(id, version));
    if (cached) return cached;
    const parent = await this.get(parentId, version);
    const node = parent.graph.nodes.get(nodeId);
    const definition = node && derivedDefinition(parent.graph, node, toolName);
    if (!definition) throw new NotFoundError(`workflow "${parentId}" version ${version} has no ${what}`);
    const { workflow, graph } = parseWorkflowOrThrow(definition, {
      maxOutputBytes: this.options.maxOutputBytes,
      stored: true,
    });
    const loaded = {
      id,
      version,
      document: { ...definition, id, version },
      definition: workflow,
      graph,
      checkInput: () => [],
      triggers: [],
    };
    this.cache.set(key(id, version), loaded);
    return loaded;
  }

  /**
   * Makes sure the rows of a stored version's derived workflows exist (once per process and
   * version): a version registered by a Skein that did not derive its agent tools' has none, and a
   * run of a workflow without its row cannot be written.
   */
  async storeDerived(id: string, version: number): Promise<void> {
    const k = key(id, version);
    if (this.derivedStored.has(k)) return;
    const { graph } = await this.get(id, version);
    await this.putItemWorkflows(graph, id, version, this.options.now());
    this.derivedStored.add(k);
  }

  /**
   * Stores the workflows a version's nodes start runs of, at that version (runs refer to their
   * workflow's row): a map node's items', and each agent tool's whose calls an external worker
   * serves (a run of one node per call, tool-runs in calls/agent/tools.ts).
   */
  private async putItemWorkflows(graph: WorkflowGraph, id: string, version: number, now: number): Promise<void> {
    for (const node of graph.nodes.values()) {
      const tools = node.kind === agentKind ? workerTools(node) : [];
      const derived = node.kind === mapKind ? [undefined] : tools.map((t) => t.name);
      for (const tool of derived) {
        const derivedId = itemWorkflowId(id, node.id, tool);
        const text = canonicalJson({ ...derivedDefinition(graph, node, tool), id: derivedId, version });
        await this.store.putWorkflowVersion(derivedId, version, sha256(`${version}\n${text}`), text, now);
      }
    }
  }

  private async compileInputSchema(workflow: WorkflowDefinition): Promise<(input: unknown) => Problem[]> {
    if (!workflow.input_schema) return () => [];
    if (!this.ajv) {
      const { Ajv } = await import("ajv");
      this.ajv = new Ajv({ allErrors: true, strict: false });
    }
    let validate: ValidateFunction;
    try {
      validate = this.ajv.compile(workflow.input_schema);
    } catch (e) {
      throw new ValidationError("Workflow definition is invalid", [
        { path: "input_schema", message: `not a valid JSON Schema: ${(e as Error).message}` },
      ]);
    }
    return (input) => {
      if (validate(input)) return [];
      return (validate.errors ?? []).map((err) => ({
        path: `input${err.instancePath.replace(/\/([^/]+)/g, (_m, k: string) => (/^\d+$/.test(k) ? `[${k}]` : `.${k}`))}`,
        message: err.message ?? "is invalid",
      }));
    };
  }
}

/**
 * A trigger whose input holds no template makes the same input of every event: one the
 * input_schema refuses would refuse every run, so it is refused at registration, at its path.
 */
function literalInputProblems(workflow: WorkflowDefinition, checkInput: (input: unknown) => Problem[]): Problem[] {
  return compileTriggers(workflow).flatMap((t) =>
    t.template === null && t.literal !== undefined
      ? checkInput(t.literal).map((p) => ({
          path: `triggers[${t.index}].${p.path}`,
          message: `${p.message}: the workflow's input_schema refuses this input, so the trigger could never start a run`,
        }))
      : [],
  );
}

/** An agent node's tools whose calls may be served by an external worker: not MCP's, not `workflow` (a run of its own). */
function workerTools(node: CompiledNode): AgentTool[] {
  const tools = ((node.def.payload as { tools?: unknown[] } | undefined)?.tools ?? []) as (AgentTool | McpToolSet)[];
  return tools.filter((t): t is AgentTool => !("mcp" in t) && t.agent_type !== "workflow");
}

/** A derived workflow's definition: a map node's items' (`tool` absent) or an agent tool's; null when the node has none. */
function derivedDefinition(parent: WorkflowGraph, node: CompiledNode, tool: string | undefined) {
  if (tool === undefined) return node.kind === mapKind ? itemDefinition(parent, node) : null;
  const declared = node.kind === agentKind ? workerTools(node).find((t) => t.name === tool) : undefined;
  return declared ? toolDefinition(parent, node, declared) : null;
}

/**
 * The one-node definition a call of an agent tool runs as when no agent of the calling engine
 * serves it: the tool's agent, its retries and timeout; the call's payload (the model's
 * arguments, or the tool's `payload`) is the run's input, the worker's `task.input`.
 */
function toolDefinition(parent: WorkflowGraph, node: CompiledNode, tool: AgentTool) {
  return {
    id: "agent-tool",
    timeout: parent.timeout,
    nodes: [
      {
        node_id: "call",
        agent_type: tool.agent_type,
        // The call's payload is the run's input (a node's payload is an object of templates, not one).
        payload: {},
        retry_count: tool.retry_count ?? 0,
        timeout: tool.timeout ?? node.timeout,
      },
    ],
  };
}

/** The one-node definition a map node's items run: `each`, with the node's retry settings and timeout. */
function itemDefinition(parent: WorkflowGraph, node: CompiledNode) {
  const each = (node.def.payload as { each: MapPayload["each"] }).each;
  const item =
    "agent_type" in each
      ? {
          agent_type: each.agent_type,
          payload: each.payload ?? {},
          ...("compensation" in each ? { compensation: each.compensation } : {}),
        }
      : {
          agent_type: "workflow",
          payload: { workflow_id: each.workflow_id, version: each.version ?? null, input: each.input ?? "{{ item }}" },
        };
  return {
    id: "map-item",
    timeout: parent.timeout,
    nodes: [
      {
        node_id: node.id,
        ...item,
        retry_count: node.retry_count,
        retry_interval: node.retry_interval,
        retry_backoff: node.retry_backoff,
        retry_max_interval: node.retry_max_interval,
        retry_jitter: node.retry_jitter,
        timeout: node.timeout,
        ...(node.heartbeat_timeout === null ? {} : { heartbeat_timeout: node.heartbeat_timeout }),
      },
    ],
  };
}

export { ITEM_SEPARATOR };

/** The id of the workflow a map node's items run (`<workflow>/<node>`), or an agent tool's calls (`<workflow>/<node>/<tool>`). */
export function itemWorkflowId(workflowId: string, nodeId: string, tool?: string): string {
  return `${workflowId}${ITEM_SEPARATOR}${nodeId}${tool === undefined ? "" : `${ITEM_SEPARATOR}${tool}`}`;
}

function key(id: string, version: number): string {
  return `${id}@${version}`;
}
