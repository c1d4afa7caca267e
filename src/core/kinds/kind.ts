/**
 * A node kind: what a visit of one built-in agent_type does (DESIGN §11). One interface, one
 * file per kind (as Kysely's `Dialect`): validation, the graph, the scheduler and the flush ask
 * the kind of a node (`kindOf`, `CompiledNode.kind`) and never compare agent_type strings.
 *
 * Adding a kind is adding a file here and a line in `index.ts`, plus its store pieces when its
 * visits wait on something the database must find (a column, an index, a query). Built:
 * task, aggregator, human_review, sleep, `wait_event` (§11.2: `prepare` reads the run's oldest events of its name
 * (never the whole inbox),
 * `begin` takes the oldest event or goes WAITING, `due` fails it `event_timeout`; inputs in
 * engine/writer/kinds/events.ts), `workflow` (§11.1: a child run per attempt, engine/writer/kinds/children.ts)
 * and `map` (§11.1: a child run per item, items as rows, engine/writer/kinds/maps.ts).
 */

import type { AgentHandler } from "../../agents/task.js";
import type { CompiledNode } from "../../definition/graph.js";
import type { NodeDefinition } from "../../definition/schema.js";
import type { Problem } from "../../errors.js";
import type { InboxTx } from "../../store/store.js";
import type { RunState } from "../scheduler.js";
import type { Json, Visit } from "../types.js";

/** What a kind's validation may ask of the workflow. */
export interface KindChecks {
  /** `nodes[i]`: prefix of every path a problem names. */
  readonly at: string;
  /** The problem for a reference to a node that does not exist (with a "did you mean"). */
  unknownNode(path: string, id: string): Problem | null;
  /** The document was accepted when it was stored: rules added since do not refuse it. */
  readonly stored: boolean;
}

export interface NodeKind {
  /** The agent_type that selects this kind; `task` is every agent_type no kind reserves. */
  readonly name: string;
  /**
   * How a ready visit starts. `agent`: an attempt claimed by an in-process agent or an external
   * worker, within the concurrency limits. `engine`: the engine starts it in the claiming flush
   * (`begin`), with no agent and no concurrency limit; workers may not claim it.
   */
  readonly start: "agent" | "engine";
  /**
   * What a worker that asks for one is told (`<name> nodes ...`): set for every `start: "engine"`
   * kind, and for built-in agents only the engine runs (`http`).
   */
  readonly notClaimable?: string;
  /** False: the node's retry settings and `defaults` do not apply; its timeout defaults to the workflow's. */
  readonly retries: boolean;
  /**
   * For `start: "agent"`: the built-in agent that runs its attempts in process (the
   * aggregator's, for nodes whose edges need an expression), unless the engine is given one.
   */
  handler?(limits: { maxOutputBytes: number }): AgentHandler;
  /**
   * Payload fields whose templates do not resolve as the visit becomes ready: kept as written
   * (a map's `each`, which every item resolves in its own run).
   */
  readonly deferred?: readonly string[];
  /** Errors in a node of this kind beyond the schema's (its payload, its edges). */
  validate?(node: NodeDefinition, checks: KindChecks): Problem[];
  /** The nodes whose outputs it reads (an aggregator's sources); none by default. */
  sources?(node: NodeDefinition): string[];
  /** Why a payload resolved from templates is refused (becomes `template_error`), or null. */
  checkResolved?(payload: Json): string | null;
  /**
   * Runs as the visit becomes ready, inside the transaction; true when it finished the visit
   * there (an aggregator whose edges need no expression).
   */
  inline?(rs: RunState, node: CompiledNode, v: Visit, now: number): boolean;
  /**
   * For `start: "engine"`, before `begin`: reads what it needs from the store, in the
   * transaction (a wait_event's inbox); what it returns is `begin`'s `prepared`.
   */
  prepare?(rs: RunState, v: Visit, tx: InboxTx, now: number): Promise<unknown>;
  /** For `start: "engine"`: the ready visit leaves PENDING (IN_REVIEW, WAITING, or done at once). */
  begin?(rs: RunState, v: Visit, now: number, prepared?: unknown): void;
  /** The due time of its hold (IN_REVIEW or WAITING: the visit's `lease_expires_at`) passed. */
  due?(rs: RunState, v: Visit, now: number): void;
}
