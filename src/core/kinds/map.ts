/**
 * `map`'s states (DESIGN §11.1): `begin` asks the flush for the visit's items
 * (engine/writer/kinds/maps.ts writes them as rows and starts them as child runs). The visit is
 * held by `map` for as long as items run (no lease: the run's TTL bounds it).
 */
import { finalFailureReason, retryWaitMs } from "../backoff.js";
import {
  errorJson,
  event,
  itemChanges,
  type LoadedItem,
  leaseExpiry,
  type RunState,
  startAttempt,
  touch,
} from "../run-state.js";
import { assertTransition } from "../states.js";
import type { Json, MapCounts, MapItem, MapItemState, Visit, VisitError } from "../types.js";
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

/**
 * An item's execution_id: its map visit's and its index (`<run_id>:<node_id>:<visit>~<index>`),
 * stable across its attempts (an agent's idempotency key, as a visit's is). `~` needs no
 * escaping in a URL's path, where a worker sends it back (`POST /v1/tasks/{execution_id}/...`).
 */
export function itemExecutionId(mapExecutionId: string, index: number): string {
  return `${mapExecutionId}~${index}`;
}

/** An item's execution_id → its map visit's execution_id and its index; null for any other id. */
export function parseItemExecutionId(executionId: string): { map: string; index: number } | null {
  const tilde = executionId.lastIndexOf("~");
  if (tilde < 0) return null;
  const digits = executionId.slice(tilde + 1);
  const index = Number(digits);
  if (!Number.isInteger(index) || index < 0 || digits !== String(index)) return null;
  return { map: executionId.slice(0, tilde), index };
}

/** An item its map starts: ready to claim now (`MapItem.ready_at`), by an engine or a worker serving its agent. */
export function readyItem(rs: RunState, item: LoadedItem, now: number): void {
  item.row.agent_type = item.node.agent_type;
  item.row.ready_at = now;
  const changes = itemChanges(rs);
  changes.rows.add(item.row);
  changes.readied.push(item);
}

/**
 * The moves of an item that holds its own attempts (`MapItem.agent_type`), as a visit's
 * (run-state.ts, scheduler.ts): `node` is its item workflow's node (the map node's retry settings
 * and timeout). An item that ends changes its map visit's counts (`map`), and the map's step goes
 * on (`Changes.itemsEnded`). Starts and successes are the row's (`started_at`, `attempt`,
 * `holder`, `ended_at`); failed attempts are events of the map's run, as a visit's are.
 */
export const itemMoves = {
  claim(rs: RunState, item: LoadedItem, holder: string, now: number): void {
    const { row, node } = item;
    transitionItem(rs, row, "RUNNING");
    startAttempt(row, node, holder, now);
  },

  renew(rs: RunState, item: LoadedItem, now: number): void {
    item.row.lease_expires_at = leaseExpiry(item.node, item.row, now);
    itemChanges(rs).rows.add(item.row);
  },

  succeed(rs: RunState, map: Visit, item: LoadedItem, output: Json, now: number): void {
    transitionItem(rs, item.row, "SUCCEEDED");
    clearItemAttempt(item.row);
    item.row.output = output;
    item.row.error = null;
    ended(rs, map, item.row, now);
  },

  fail(
    rs: RunState,
    map: Visit,
    item: LoadedItem,
    error: VisitError,
    retryable: boolean,
    now: number,
    random: () => number,
  ): void {
    const { row, node } = item;
    row.failures += 1;
    row.error = error;
    if (retryable && row.failures <= node.retry_count) {
      transitionItem(rs, row, "RETRYING");
      clearItemAttempt(row);
      row.ready_at = now + retryWaitMs(node, row.failures, error, random);
      itemChanges(rs).readied.push(item);
      event(rs, "item.retrying", map, now, itemData(row, { error: errorJson(error), retry_at: row.ready_at }));
      return;
    }
    itemMoves.failForGood(rs, map, item, finalFailureReason(retryable, error), error, now);
  },

  failForGood(rs: RunState, map: Visit, item: LoadedItem, reason: string, error: VisitError, now: number): void {
    transitionItem(rs, item.row, "FAILED");
    clearItemAttempt(item.row);
    // Its reason says why the item failed for good (retries_exhausted, timeout, ...), as a failed item run's does.
    item.row.error = { ...error, reason };
    event(rs, "item.failed", map, now, itemData(item.row, { reason, error: errorJson(error) }));
    ended(rs, map, item.row, now);
  },

  /** Its engine died: due again now without spending the retry budget; the third time fails it. */
  interrupt(rs: RunState, map: Visit, item: LoadedItem, now: number): void {
    const { row } = item;
    row.interruptions += 1;
    const error: VisitError = { message: `the engine holding attempt ${row.attempt} stopped`, reason: "interrupted" };
    if (row.interruptions >= 3) {
      const message = `interrupted ${row.interruptions} times: poison task`;
      itemMoves.failForGood(rs, map, item, "interrupted", { ...error, message }, now);
      return;
    }
    transitionItem(rs, row, "RETRYING");
    clearItemAttempt(row);
    row.ready_at = now;
    itemChanges(rs).readied.push(item);
    event(rs, "item.interrupted", map, now, itemData(row, { interruptions: row.interruptions }));
  },

  /** The map ended or was cancelled while the item waited or ran: its attempt's result will be fenced. */
  cancel(rs: RunState, map: Visit, row: MapItem, now: number): void {
    transitionItem(rs, row, "CANCELLED");
    clearItemAttempt(row);
    ended(rs, map, row, now);
  },
};

function transitionItem(rs: RunState, row: MapItem, to: MapItemState): void {
  assertTransition(row.state, to, `item ${row.index} of ${row.run_id}:${row.node_id}:${row.visit}`);
  row.state = to;
  itemChanges(rs).rows.add(row);
}

/** Its attempt ended: nothing is due. The holder stays, that of its last attempt (a worker's report is checked by it). */
function clearItemAttempt(row: MapItem): void {
  row.ready_at = null;
  row.deadline_at = null;
  row.lease_expires_at = null;
}

/** An item ended: its map visit counts it (a map that no longer holds its items, cancelled, counts nothing more). */
function ended(rs: RunState, map: Visit, row: MapItem, now: number): void {
  row.ended_at = now;
  const c = map.items;
  if (!c) return;
  c.running = Math.max(0, c.running - 1);
  if (row.state === "SUCCEEDED") c.succeeded += 1;
  else if (row.state === "FAILED") c.failed += 1;
  else c.cancelled += 1;
  touch(rs, map);
  itemChanges(rs).ended.add(map);
}

function itemData(row: MapItem, data: Record<string, Json>): Record<string, Json> {
  return { index: row.index, attempt: row.attempt, ...data };
}
