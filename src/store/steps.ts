/** Durable steps inside a visit (DESIGN §14.1): the results attempts recorded with `task.step`. */
import type { Json } from "../core/types.js";
import type { VisitKey } from "./runs.js";

/** One recorded step: its attempt's execution_id (a visit's, a compensation's or a map item's) and name. */
export interface StepRow {
  execution_id: string;
  name: string;
  /** The visit it belongs to (a map item's: its map visit; a compensation's: the visit it undoes). */
  run_id: string;
  node_id: string;
  visit: number;
  /** The attempt that recorded it; a row a redrive copied keeps its original attempt. */
  attempt: number;
  output: Json;
  /** Bytes of the output's JSON. */
  size: number;
  recorded_at: number;
}

/** Steps inside a write transaction: no lock of their own (the run's lock guards them); DatabaseError on a failure of the database. */
export interface StepsTx {
  /**
   * Inserts the rows whose (execution_id, name) has none yet, in order; answers, for each, the
   * row now recorded under its key: itself, or the one recorded before (the first record wins).
   */
  recordSteps(rows: StepRow[]): Promise<StepRow[]>;
  /**
   * Copies the steps of visit `from` to visit `to` of the same node, of its run or another (a
   * redrive's new visit starts with them; a fork's kept visit keeps them). `to`'s run must exist.
   */
  copySteps(from: VisitKey, to: VisitKey): Promise<void>;
}

/** Steps outside transactions (committed data only). */
export interface StepReads {
  /** The steps recorded under these execution_ids, in the order they were recorded. */
  stepsOf(executionIds: readonly string[]): Promise<StepRow[]>;
  /** A run's steps (only `nodeId`'s, when given) over all visits, by node, visit, then the order recorded in. */
  runSteps(runId: string, nodeId?: string): Promise<StepRow[]>;
  /** The steps named `name` (which starts `thread:`: an agent thread's visits), in the order recorded. */
  threadSteps(name: string): Promise<StepRow[]>;
}
