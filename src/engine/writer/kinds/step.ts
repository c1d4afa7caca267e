/**
 * The in-transaction face of a node kind the engine starts (`workflow`, `map`): core's kind
 * asks for its visit's work as the visit begins (`Changes.starts`), and the flush hands each
 * such visit to the step registered under the node's kind (kinds/index.ts). A step starts the
 * work, goes on with it in each flush round, stops it when its visit is cancelled, takes the end
 * of the runs it started, and sweeps what fell due. Its scratch state is its own.
 */
import type { RunState } from "../../../core/scheduler.js";
import type { Visit } from "../../../core/types.js";
import type { Input } from "../inputs.js";

export interface KindStep {
  /** Starts the work of a ready visit of the kind (its child run, its first items), or fails the visit. */
  start(rs: RunState, v: Visit): Promise<unknown>;
  /** A visit of the kind was cancelled in this flush (its run ended, a loop reset): its work stops. */
  cancelled(rs: RunState, v: Visit): Promise<void>;
  /** A run a visit of the kind started ended (`parent`: the visit's run, loaded): the visit takes its end. */
  childEnded(parent: RunState, child: RunState): Promise<void>;
  /** A flush round: what moved in it goes on (a map's items that ended); true when it changed anything. */
  round?(): Promise<boolean>;
  /** In a claiming round: compensation rows the engine runs for the kind (undoing a map's items); true when it changed anything. */
  undo?(): Promise<boolean>;
  /** The sweep: what an earlier flush could not do (the other run was busy elsewhere, or a crash came between). */
  sweep?(limit: number): Promise<void>;
  /** The engine's first flush, or one after another engine died: work held in a gone engine's memory goes on. */
  takeOver?(): Promise<void>;
  /** Inputs for the next flush: work this flush had no room for (bounded-work.ts). */
  leftOver?(): Input[];
}

/** The runs kinds start as children (kinds/children.ts): what a kind step asks of them. */
export interface ChildRuns {
  /** Cancels a child run in this flush's next round (compensating when `compensate`), once. */
  cancel(runId: string, compensate: boolean): void;
  /** Gives an ended child's end to its parent's kind step; false when the parent is busy elsewhere. */
  settle(child: RunState): Promise<boolean>;
  /** Whether this flush already gave the run's end to its parent. */
  settled(runId: string): boolean;
}
