/** The item rows of `map` visits (DESIGN §11.1). */
import type { Json, MapItem, MapItemState, VisitError } from "../core/types.js";
import type { VisitKey } from "./runs.js";

/** A change to one item row of a `map` visit, written at once (later reads in the transaction see it). */
export interface MapItemUpdate {
  key: VisitKey;
  index: number;
  state: MapItemState;
  child_run_id?: string | null;
  output?: Json | null;
  error?: VisitError | null;
  started_at?: number | null;
  ended_at?: number | null;
}

/** An item row's key: its map visit's and its index. */
export interface ItemKey extends VisitKey {
  index: number;
}

/** An item of a map visit that did not succeed, as `failedMapItems` reads it. */
export interface FailedMapItem {
  index: number;
  child_run_id: string | null;
  error: VisitError | null;
}

/** Thrown by `updateMapItems` for an item row that does not exist: the engine's mistake, never the user's. */
export function missingMapItem(u: Pick<MapItemUpdate, "key" | "index">): Error {
  return new Error(
    `skein: map visit ${u.key.run_id}/${u.key.node_id}#${u.key.visit} has no item ${u.index} to update; ` +
      "items are inserted (insertMapItems) before they change",
  );
}

/**
 * The item rows of `map` visits, inside a write transaction: no lock of their own (the map's run
 * lock guards them); DatabaseError on a failure of the database.
 */
export interface MapTx {
  /**
   * Inserts items PENDING from index `offset` (default 0), carrying over a failed `visit - 1`'s
   * same SUCCEEDED items; counts both. `priority`: the map's run's, copied onto each row.
   */
  insertMapItems(
    key: VisitKey,
    items: Json[],
    now: number,
    priority: number,
    offset?: number,
  ): Promise<{ total: number; carried: number }>;
  /** PENDING items with index >= `from`, by index, at most `limit`. */
  pendingMapItems(key: VisitKey, from: number, limit: number): Promise<{ index: number; item: Json }[]>;
  /** Writes the changes in order (fields left out kept); throws missingMapItem's Error for an item without a row: roll back. */
  updateMapItems(updates: MapItemUpdate[]): Promise<void>;
  /** The child run of the visit's SUCCEEDED item that ended last (the next to undo), or null. */
  newestSucceededMapItem(key: VisitKey): Promise<string | null>;
  /** The visit's FAILED and CANCELLED items by index with run and error, at most `limit`: a map's `failed_items`. */
  failedMapItems(key: VisitKey, limit: number): Promise<FailedMapItem[]>;
  /** The child runs of RUNNING items of the visit, at most `limit`. */
  runningMapItems(key: VisitKey, limit: number): Promise<string[]>;
  /** Map visits still held (RUNNING, or CANCELLED with items running), whose chunked continuation was in an engine's memory. */
  heldMaps(limit: number): Promise<string[]>;
  /** The items' outputs by index as one JSON array text built by the database (null: not succeeded), or its size past `maxBytes`. */
  mapOutput(key: VisitKey, maxBytes: number): Promise<{ text: string } | { tooLarge: number }>;
  /** Item child runs that ended while their item is still RUNNING: their end is owed to the map. */
  mapItemsToSettle(limit: number): Promise<string[]>;
  /** The rows of these items (those that exist), in no particular order. */
  loadMapItems(keys: ItemKey[]): Promise<MapItem[]>;
  /** Writes these rows whole (all but their key and item), in order; throws missingMapItem's Error for a row that does not exist. */
  writeMapItems(rows: MapItem[]): Promise<void>;
  /**
   * Items holding their attempts that were started and have not ended (ready, RUNNING, RETRYING) of
   * the visit, by index, at most `limit`: what cancelling the map cancels.
   */
  activeMapItems(key: VisitKey, limit: number): Promise<MapItem[]>;
  /** Items of the agent type ready by `now` (not of a paused run), by priority then oldest due first, at most `limit`, their runs locked as `claimable`'s. */
  claimableMapItems(agentType: string, now: number, limit: number): Promise<ItemKey[]>;
  /** Items whose RUNNING attempt's lease or deadline passed by `now`, at most `limit`. */
  expiredMapItems(now: number, limit: number): Promise<ItemKey[]>;
  /** Items whose RUNNING attempt any of these holders holds (engines taken for dead), at most `limit`. */
  mapItemsHeldBy(holders: string[], limit: number): Promise<ItemKey[]>;
}
