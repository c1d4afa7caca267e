/**
 * `map`'s states (DESIGN §11.1): `begin` asks the flush for the visit's items
 * (engine/writer/kinds/maps.ts writes them as rows and starts them as child runs). The visit is
 * held by `map` for as long as items run (no lease: the run's TTL bounds it).
 */
import type { MapCounts } from "../types.js";
import type { KindStates } from "./kind.js";

/** The holder of a map visit while its items run (and of its items' undo: the kind's name, definition/kinds `undoAgent`). */
export const MAP_HOLDER = "map";

export const map: KindStates = {
  begin(rs, v) {
    rs.changes.starts.add(v);
  },
};

/** Items not started yet: the counts keep only those that change as items start and end. */
export function pendingItems(c: MapCounts): number {
  return Math.max(0, c.total - c.running - c.succeeded - c.failed - c.cancelled);
}
