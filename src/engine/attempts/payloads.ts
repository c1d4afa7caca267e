/**
 * Payload templates resolved outside any transaction (expressions are asynchronous): a ready
 * visit's payload and `concurrency.key`, once, handed to the writer to store; and a
 * compensation's payload, at each of its attempts. Secrets stay markers here: what is stored
 * holds "[secret NAME]" (engine/attempts/secrets.ts).
 */
import type { Json } from "../../core/types.js";
import type { CompiledPayload, ExpressionContext } from "../../definition/expressions.js";
import type { CompiledNode } from "../../definition/graph.js";
import { NonRetryableError } from "../../errors.js";
import type { Store, VisitKey } from "../../store/store.js";
import type { WorkflowRegistry } from "../registry.js";
import type { RunRef } from "../writer/dispatcher-options.js";
import type { ClaimedTask, Input, Submit } from "../writer/inputs.js";
import { expressionContext } from "./expression-context.js";
import { errorOf } from "./handler-errors.js";
import { checkJson } from "./outcomes.js";
import { markers, notConfigured, type Secrets, seal, unmark } from "./secrets.js";

export interface PayloadsOptions {
  registry: WorkflowRegistry;
  store: Store;
  /** Whether this engine runs an agent type (a secret it lacks then fails the visit at once). */
  runsInProcess: (agentType: string) => boolean;
  secrets: Secrets;
  /** Largest accepted resolved payload, in bytes of JSON. */
  maxOutputBytes: number;
  /** Where resolved payloads go: the writer's queue. */
  submit: Submit;
}

export class Payloads {
  private readonly resolving = new Set<string>();

  constructor(private readonly o: PayloadsOptions) {}

  /** Whether payloads are being resolved (the test harness waits for none). */
  busy(): boolean {
    return this.resolving.size > 0;
  }

  /** Resolves a ready visit's payload templates once; the writer stores the result. */
  resolve(key: VisitKey, known?: RunRef): void {
    const id = `${key.run_id}:${key.node_id}:${key.visit}`;
    if (this.resolving.has(id)) return;
    this.resolving.add(id);
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
        const ctx = await expressionContext(this.o.store, run, graph, undefined, run.parent?.item === undefined);
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
        const resolved = await this.templated(node, ctx);
        if ("problem" in resolved) {
          return { kind: "payload_error", key, error: { message: resolved.problem, reason: "template_error" } };
        }
        return { kind: "payload", key, payload: resolved.payload, concurrency_key: concurrencyKey };
      } catch (e) {
        return { kind: "payload_error", key, error: { message: errorOf(e).message, reason: "template_error" } };
      }
    })().then((input) => {
      this.resolving.delete(id);
      this.o.submit(input);
    });
  }

  /**
   * A node's payload templates resolved (`node.payload`, which must be set), as stored: secrets
   * are markers ("[secret NAME]", engine/attempts/secrets.ts), fields its kind resolves later kept
   * as written, checked as JSON within the limit and by its kind; or why not.
   */
  private async templated(
    node: CompiledNode,
    ctx: ExpressionContext,
  ): Promise<{ payload: Json } | { problem: string }> {
    const template = node.payload as CompiledPayload;
    const written = (node.def.payload ?? {}) as Record<string, Json>;
    // An agent of this engine would run it: a secret it lacks fails the visit now (a worker has its own).
    const missing = this.o.runsInProcess(node.agent_type)
      ? template.secretNames.find((name) => !this.o.secrets.has(name))
      : undefined;
    if (missing !== undefined) return { problem: notConfigured(missing) };
    // Templates see markers, never values; what is stored holds "[secret NAME]" (engine/attempts/secrets.ts).
    const marks = template.secretNames.length > 0 ? markers(template.secretNames) : null;
    let raw: unknown;
    try {
      raw = await template.resolve(marks ? { ...ctx, secrets: marks.secrets } : ctx);
    } catch (e) {
      // An expression's error may quote a marker (`$number(secrets.X)`): never stored as such.
      return { problem: marks ? unmark(errorOf(e).message, marks) : errorOf(e).message };
    }
    const sealed = marks ? seal(raw, marks, template.secretUses) : { value: raw };
    if ("problem" in sealed) return { problem: sealed.problem };
    const resolved = sealed.value;
    // Fields the kind resolves later (a map's `each`) are kept as written.
    for (const field of node.kind.deferred ?? []) {
      if (field in written) (resolved as Record<string, unknown>)[field] = written[field];
    }
    const payload = checkJson(resolved, "payload", this.o.maxOutputBytes);
    if (!payload.ok) return { problem: payload.problem };
    // The node's kind may refuse what the templates gave (a review's assignees, a sleep's time).
    const refused = node.kind.checkResolved?.(payload.value) ?? null;
    return refused ? { problem: refused } : { payload: payload.value };
  }

  /**
   * A map item's payload (DESIGN §11.1): `each.payload` (its item workflow's node's) resolved for
   * the item at each attempt, outside any transaction; its templates see `item`, `index` and
   * `input` (the item). Every attempt sees the same: the item and its index do not change.
   */
  async item(t: ClaimedTask & { item: { index: number } }): Promise<{ payload: Json } | { problem: string }> {
    const { graph } = await this.o.registry.get(t.workflow_id, t.workflow_version);
    const node = graph.nodes.get(t.node_id);
    if (!node) return { problem: `the item workflow ${t.workflow_id} has no node "${t.node_id}"` };
    if (!node.payload) return { payload: (node.def.payload ?? {}) as Json };
    const ctx: ExpressionContext = {
      input: t.input,
      nodes: {},
      run: { run_id: t.run_id, trace_id: t.trace_id },
      item: t.input,
      index: t.item.index,
    };
    return this.templated(node, ctx);
  }

  /**
   * A compensation's payload: its templates see `self` (the undone visit's execution_id, output
   * and error). Resolved at each attempt: the run has ended, so every attempt sees the same.
   */
  async compensation(t: ClaimedTask): Promise<Json> {
    const { graph } = await this.o.registry.get(t.workflow_id, t.workflow_version);
    const node = graph.nodes.get(t.node_id);
    const template = node?.compensationPayload;
    if (!template) return (node?.def.compensation?.payload ?? {}) as Json;
    let value: unknown;
    try {
      const ctx = await expressionContext(this.o.store, t, graph);
      value = await template.resolve({ ...ctx, self: t.compensates });
    } catch (e) {
      throw new NonRetryableError(`compensation payload of ${t.node_id}: ${errorOf(e).message}`);
    }
    const checked = checkJson(value, "payload", this.o.maxOutputBytes);
    if (!checked.ok) throw new NonRetryableError(`compensation payload of ${t.node_id}: ${checked.problem}`);
    return checked.value;
  }
}
