/**
 * A node kind's STATES: what a visit of one built-in kind does in the scheduler (DESIGN §11),
 * beside its rules (definition/kinds/). One interface, one file per kind that has states (task,
 * http and llm have none: an agent runs their attempts); the table is index.ts.
 *
 * The states are called by the scheduler (`inline`, as a visit becomes ready) and by the flush
 * (`prepare` and `begin` as it starts a visit, `due` as it sweeps). They move the visit with
 * run-state.ts, and with the scheduler's moves that go on to settle the run (`Moves`), passed
 * in: the scheduler calls the kinds, so the kinds do not import it.
 */

import type { CompiledNode } from "../../definition/graph.js";
import type { Decision, RunState } from "../run-state.js";
import type { InboxEvent, Json, Visit, VisitError } from "../types.js";

/** The scheduler's moves that fire edges or end the run (scheduler.ts), as the kinds' states use them. */
export interface Moves {
  /** Records a successful attempt and fires its decision. */
  succeed(rs: RunState, v: Visit, output: Json, decision: Decision, now: number): void;
  /** Fails the visit for good and fires its failure edges. */
  failVisit(rs: RunState, v: Visit, reason: string, error: VisitError | null, now: number): void;
  /** Records a failed attempt: a retry when the budget allows and the error is retryable. */
  failAttempt(rs: RunState, v: Visit, error: VisitError, retryable: boolean, now: number): void;
}

/**
 * What a wait_event's `prepare` reads from the inbox, in the transaction (the store's InboxTx
 * has it): never the whole inbox.
 */
export interface InboxReader {
  /** The run's oldest events of this name no wait_event took yet, oldest first, at most `limit`. */
  waitingEvents(runId: string, name: string, limit: number): Promise<InboxEvent[]>;
  /** Events published by key (name, key) at `since` or later, oldest first. */
  keyedEvents(name: string, key: string, since: number): Promise<InboxEvent[]>;
}

export interface KindStates {
  /**
   * Runs as the visit becomes ready, inside the transaction; true when it finished the visit
   * there (an aggregator whose edges need no expression).
   */
  inline?(rs: RunState, node: CompiledNode, v: Visit, now: number, moves: Moves): boolean;
  /**
   * For `start: "engine"`, before `begin`: reads what it needs from the store, in the
   * transaction (a wait_event's inbox); what it returns is `begin`'s `prepared`.
   */
  prepare?(rs: RunState, v: Visit, inbox: InboxReader, now: number): Promise<unknown>;
  /** For `start: "engine"`: the ready visit leaves PENDING (IN_REVIEW, WAITING, or done at once). */
  begin?(rs: RunState, v: Visit, now: number, prepared: unknown, moves: Moves): void;
  /** The due time of its hold (IN_REVIEW or WAITING: the visit's `lease_expires_at`) passed. */
  due?(rs: RunState, v: Visit, now: number, moves: Moves): void;
}
