/**
 * Reading a `map` node's items (DESIGN §11.1): a page of its item rows, and its counts as shown
 * with `pending` worked out (the store keeps only the counts that change as items start and end).
 * Items are read a page at a time because a map may have 10,000 of them: getRun lists none.
 */
import { pendingItems } from "../core/kinds/map.js";
import type { MapCounts, MapItem, Visit } from "../core/types.js";
import { map as mapKind } from "../definition/kinds/map.js";
import { NotFoundError } from "../errors.js";
import type { Store } from "../store/store.js";
import { refuseNul } from "./identifiers.js";
import { checkPaging } from "./paging.js";
import type { WorkflowRegistry } from "./registry.js";

/** How many items a page has unless the caller asks for fewer. */
export const MAP_ITEMS_DEFAULT_LIMIT = 100;
/** The most items one page may have. */
export const MAP_ITEMS_MAX_LIMIT = 1000;

/** A map visit's counts as shown: with the items not started yet. */
export interface MapProgress extends MapCounts {
  /** Items not started yet: total - running - succeeded - failed - cancelled. */
  pending: number;
}

export interface ListMapItemsOptions {
  /** The visit of the node (default: its current visit). */
  visit?: number;
  /** Items after this index (exclusive); default -1, from the first. */
  after?: number;
  /** At most this many (default 100, at most 1000). */
  limit?: number;
}

export interface MapItemPage {
  items: MapItem[];
  /** Pass as `after` for the next page; null on the last. */
  next_after: number | null;
}

/** The counts with `pending`, or null for a visit that is not a map's (or has not begun). */
export function mapProgress(counts: MapCounts | null): MapProgress | null {
  if (counts === null) return null;
  const { written: _, ...shown } = counts; // how far the rows are written is the engine's business
  return { ...shown, pending: pendingItems(counts) };
}

/**
 * A page of a map node's items, by index.
 * @throws ValidationError for a bad visit, after or limit; NotFoundError for an unknown run, or
 *   a node that is not one of its workflow's map nodes
 */
export async function listMapItems(
  store: Store,
  registry: WorkflowRegistry,
  runId: string,
  nodeId: string,
  options: ListMapItemsOptions,
): Promise<MapItemPage> {
  refuseNul({ run_id: runId, node_id: nodeId });
  const after = options.after ?? -1;
  const limit = options.limit ?? MAP_ITEMS_DEFAULT_LIMIT;
  checkPaging(
    "listMapItems",
    { visit: options.visit, after, limit },
    { after: "an item index", things: "items", maxLimit: MAP_ITEMS_MAX_LIMIT },
  );
  const read = await store.readRun(runId);
  if (!read) throw new NotFoundError(`run ${runId} does not exist; check the run id and the database`);
  const { graph } = await registry.get(read.run.workflow_id, read.run.workflow_version);
  if (graph.nodes.get(nodeId)?.kind !== mapKind) {
    const maps = [...graph.nodes.values()].filter((n) => n.kind === mapKind).map((n) => n.id);
    const which = maps.length === 0 ? "it has none" : `its map nodes are ${maps.join(", ")}`;
    throw new NotFoundError(
      `workflow ${read.run.workflow_id} v${read.run.workflow_version} of run ${runId} has no map node "${nodeId}": ${which}`,
    );
  }
  const visit = options.visit ?? read.visits.find((v: Visit) => v.node_id === nodeId)?.visit;
  if (visit === undefined) return { items: [], next_after: null };
  // One more than asked says whether there is a next page.
  const rows = await store.listMapItems({ run_id: runId, node_id: nodeId, visit }, { after, limit: limit + 1 });
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return { items, next_after: rows.length > limit && last ? last.index : null };
}
