/**
 * `map` visits (DESIGN §11.1), in the flush's transaction. A ready map visit is claimed by
 * `map` and writes its items as rows (`tx.insertMapItems`: a redrive carries over the items that
 * succeeded); then, as long as it is held, at most `max_concurrency` items run, each a child run
 * of the map's run: of its item workflow (registry: `<workflow_id>/<node_id>`) for agent items,
 * of `each.workflow_id` itself for workflow items (map-item-runs.ts). Each item run's end updates
 * its row and the visit's counts (`Visit.items`), and starts the next items; the last one
 * assembles the output in the database (`tx.mapOutput`), or too many failures fail the visit
 * (`items_failed`) and cancel the items still running. Nothing holds the list in memory: the
 * items are read a window at a time, and the counts are all a visit keeps.
 */
import { attemptOf, compensationAttempt, visitAttempt } from "../../../core/attempt.js";
import { BUDGET_EXCEEDED, budgetedRuns, parentLink } from "../../../core/budget.js";
import { claimableCompensation, undoRun } from "../../../core/compensation.js";
import { itemExecutionId, itemMoves, MAP_HOLDER, pendingItems, readyItem } from "../../../core/kinds/map.js";
import { executionId, failVisit, nodeOf, type RunState, startRunState } from "../../../core/scheduler.js";
import { scopeAllows } from "../../../core/scope.js";
import type { Compensation, FailedItem, Json, MapCounts, MapItem, MapItemState, Visit } from "../../../core/types.js";
import {
  FAILED_ITEMS_SHOWN,
  ITEM_SEPARATOR,
  itemsAreRows,
  mapPayload,
  toleratedFailures,
} from "../../../definition/kinds/map.js";
import { MAX_CHILD_DEPTH } from "../../../definition/kinds/workflow.js";
import { uuidv7 } from "../../../ids.js";
import type { MapItemUpdate, VisitKey } from "../../../store/store.js";
import { OUT_OF_SCOPE, outOfScopeMessage } from "../../scope.js";
import { treeRefusal } from "../bounded-work.js";
import type { Budget } from "../budget.js";
import type { FlushContext } from "../context.js";
import { itemKey, KEY_TAKEN, ownRunProblem } from "../engine-keys.js";
import { type Input, SWEEP_BATCH } from "../inputs.js";
import { itemRunMaker } from "./map-item-runs.js";
import type { ChildRuns, KindStep } from "./step.js";

/** The `map` kind's step: its scratch state is what this flush's item ends and windows left to do. */
export class Maps implements KindStep {
  /** Inputs for the next flush: maps to go on with, cancels to carry down (by execution_id). */
  private readonly continued = new Map<string, Input>();
  /** Map items whose runs ended, written together before the maps they belong to go on. */
  private readonly itemEnds: MapItemUpdate[] = [];
  /** Held map visits an item of which ended in this round, by execution_id, with their runs. */
  private readonly toAdvance = new Map<string, { rs: RunState; v: Visit }>();
  /** Map visits whose items this flush cancelled (once per flush: rounds go on until nothing follows). */
  private readonly cancelling = new Set<string>();

  constructor(
    private readonly f: FlushContext,
    private readonly budget: Budget,
    private readonly children: ChildRuns,
    /** No room left to start runs: ready visits that start runs wait for the next flush. */
    private readonly defer: () => void,
  ) {}

  leftOver(): Input[] {
    return [...this.continued.values()];
  }

  /** Item runs whose end an earlier flush could not give to their map (busy elsewhere, or a crash came between); then the maps go on. */
  async sweep(limit: number): Promise<void> {
    const f = this.f;
    for (const runId of await f.tx.mapItemsToSettle(limit)) {
      const child = await f.load(runId);
      if (child && !this.children.settled(runId)) await this.children.settle(child);
    }
    await this.round();
  }

  /** A cancelled map visit that holds its items: those still running are cancelled. */
  async cancelled(rs: RunState, v: Visit): Promise<void> {
    if (v.holder === MAP_HOLDER) await this.cancelItems(rs, v);
  }

  async start(rs: RunState, v: Visit): Promise<void> {
    const f = this.f;
    const depth = (rs.run.parent?.depth ?? 0) + 1;
    if (depth > MAX_CHILD_DEPTH) {
      const message = `a map's items may not start past depth ${MAX_CHILD_DEPTH}: run ${rs.run.run_id} is at depth ${depth - 1}`;
      failVisit(rs, v, "child_depth_exceeded", { message, reason: "child_depth_exceeded" }, f.now);
      return;
    }
    if (await this.budget.stops(rs, v)) return; // its items would count toward a budget already reached
    if (f.work.startsLeft <= 0) return this.defer(); // this flush started enough: it stays ready for the next
    const p = mapPayload(v.payload);
    // Items of a workflow outside the run's scope are never started (DESIGN §13.1): each.workflow_id
    // is a name (validation refuses a template there), so one check covers every item.
    const target = "workflow_id" in p.each ? p.each.workflow_id : null;
    if (target !== null && !scopeAllows(rs.run.scope, target)) {
      const message = outOfScopeMessage(target, rs.run.scope ?? []);
      failVisit(rs, v, OUT_OF_SCOPE, { message, reason: OUT_OF_SCOPE }, f.now);
      return;
    }
    visitAttempt(rs, v).claim(MAP_HOLDER, f.now);
    // No lease and no deadline: the items have the node's timeout each, and the run's TTL bounds the whole.
    v.deadline_at = null;
    v.lease_expires_at = null;
    v.items = { total: p.items.length, running: 0, succeeded: 0, failed: 0, cancelled: 0, next: 0, written: 0 };
    await this.advance(rs, v);
  }

  /**
   * Writes the next chunk of a map's item rows when the items it may start next are not all
   * rows yet: at most what the flush may still write (one row when the map has nothing running, so
   * it never stalls), a long list over several flushes (bounded-work.ts).
   */
  private async writeItems(v: Visit, room: number): Promise<void> {
    const f = this.f;
    const c = v.items as MapCounts;
    const written = c.written ?? c.total;
    if (written >= c.total || written - c.next >= room) return;
    const n = Math.min(c.total - written, Math.max(f.work.rowsLeft, c.running === 0 ? 1 : 0));
    if (n <= 0) return;
    const items = mapPayload(v.payload).items.slice(written, written + n);
    const { carried } = await f.tx.insertMapItems(keyOf(v), items, f.now, v.priority, written);
    f.work.rowsLeft -= n;
    c.written = written + n;
    c.succeeded += carried;
  }

  /**
   * Continues every held map visit: at an engine's start and when it takes over a dead engine's
   * work, since what a map had left to start or cancel was in the memory of the engine that held
   * it (bounded-work.ts). A map another live engine continues goes on the same way: the run is locked.
   */
  async takeOver(): Promise<void> {
    const f = this.f;
    for (const execution_id of await f.tx.heldMaps(SWEEP_BATCH)) {
      const rs = await f.loadExecution(execution_id);
      const a = rs ? attemptOf(rs, execution_id) : undefined;
      const step = a?.row.state === "RUNNING" ? "advance" : "cancel";
      await this.resume({ kind: "continue_map", execution_id, step });
    }
  }

  /** Applies a `continue_map` input: the held map visit goes on (`advance`), or its items still running are cancelled. */
  async resume(input: Extract<Input, { kind: "continue_map" }>): Promise<void> {
    const f = this.f;
    const rs = await f.loadExecution(input.execution_id);
    const a = rs ? attemptOf(rs, input.execution_id) : undefined;
    if (!rs || a?.kind !== "visit" || !a.current || a.row.holder !== MAP_HOLDER) return;
    if (input.step === "advance" && a.row.state === "RUNNING") this.toAdvance.set(a.row.execution_id, { rs, v: a.row });
    if (input.step === "cancel" && a.row.state !== "RUNNING") {
      await this.cancelItems(rs, a.row, rs.run.status === "COMPENSATING");
    }
  }

  /**
   * What a held map visit does next: fail when more items failed than it tolerates, else start
   * items while there are pending ones and room, else (none pending, none running) succeed.
   */
  private async advance(rs: RunState, v: Visit): Promise<void> {
    const f = this.f;
    const c = v.items as MapCounts;
    const p = mapPayload(v.payload);
    const tolerated = toleratedFailures(p, c.total);
    const a = visitAttempt(rs, v);
    a.touched();
    if (c.failed + c.cancelled > tolerated) {
      const failed = c.failed + c.cancelled;
      const message = `${failed} of ${c.total} items failed, more than the ${tolerated} tolerated: see the failed items' runs (listMapItems), or raise tolerated_failures / tolerated_failure_percent`;
      a.failForGood(
        "items_failed",
        { message, reason: "items_failed", details: { ...c } as unknown as Json },
        f.now,
        f.o.random,
      );
      await this.cancelItems(rs, v);
      return;
    }
    if (pendingItems(c) > 0) {
      // A budget reached (the run's or one above it) starts no more items; those running finish,
      // then the visit fails budget_exceeded with the rest not started.
      const over = await this.budget.error(rs);
      if (over && c.running === 0) return a.failForGood(BUDGET_EXCEEDED, over, f.now, f.o.random);
      if (over || c.running >= p.max_concurrency) return;
      // While items run, none more starts once their reservations take up the budget (DESIGN §13.1).
      if (c.running > 0 && !(await this.budget.room(rs))) return;
      // Within what this flush may still start (one when nothing runs, so the map never stalls);
      // the rest of its window fills in the next flushes (bounded-work.ts).
      const room = Math.min(p.max_concurrency - c.running, Math.max(f.work.startsLeft, c.running === 0 ? 1 : 0));
      await this.writeItems(v, room);
      if (room > 0 && !(await this.startItems(rs, v, room))) return; // failed tree_limit or idempotency_key_taken
      const blocked = f.work.startsLeft <= 0 || (c.written ?? c.total) < c.total;
      if (pendingItems(c) > 0 && c.running < p.max_concurrency && blocked) {
        this.continued.set(v.execution_id, { kind: "continue_map", execution_id: v.execution_id, step: "advance" });
      }
      return;
    }
    if (c.running > 0) return;
    const out = await f.tx.mapOutput(keyOf(v), f.o.maxOutputBytes);
    if ("tooLarge" in out) {
      const message = `the outputs of the ${c.total} items total ${out.tooLarge} bytes, over the limit of ${f.o.maxOutputBytes}: return less from each item (store large data elsewhere and return references), or raise maxPayloadBytes`;
      a.failForGood("output_too_large", { message, reason: "output_too_large" }, f.now, f.o.random);
      return;
    }
    const node = nodeOf(rs, v.node_id);
    const failed = c.failed + c.cancelled > 0 ? await this.failedItems(v) : null;
    if (failed) c.failed_items = failed;
    // The node.succeeded event says them too (scheduler.ts `succeed`, from the visit's counts).
    a.succeed(JSON.parse(out.text) as Json, { kind: "targets", targets: [...node.successTargets] }, f.now);
  }

  /** The items a map that succeeded within its tolerated failures did not run to success: the first ones, read from its rows. */
  private async failedItems(v: Visit): Promise<FailedItem[]> {
    const f = this.f;
    const rows = await f.tx.failedMapItems(keyOf(v), FAILED_ITEMS_SHOWN);
    return rows.map((r) => ({
      index: r.index,
      run_id: r.child_run_id,
      error: r.error ? { message: r.error.message, reason: r.error.reason } : null,
    }));
  }

  /**
   * Starts up to `room` PENDING items, in index order, each a run (map-item-runs.ts); false when
   * that would pass maxRunsPerTree (the visit failed `tree_limit`, its running items cancelled).
   * An item whose run cannot be made fails here, without a run; the map then goes on (`round`).
   */
  private async startItems(rs: RunState, v: Visit, room: number): Promise<boolean> {
    const f = this.f;
    const c = v.items as MapCounts;
    const vkey = keyOf(v);
    const rows = await f.tx.pendingMapItems(vkey, c.next, room);
    if (rows.length === 0) return true;
    // Rows that hold their attempts start no runs: no tree limit, no engine keys.
    if (holdsAttempts(rs, v)) return this.readyItems(rs, v, rows);
    const tooMany = await treeRefusal(f.tx, f.o.maxRunsPerTree, rs.run, rows.length);
    if (tooMany) {
      visitAttempt(rs, v).failForGood("tree_limit", tooMany, f.now, f.o.random);
      await this.cancelItems(rs, v);
      return false;
    }
    f.work.startsLeft -= rows.length;
    // What the database holds under these items' keys: nothing, unless a crash or a direct write
    // came between; a run that is not the item's own is never bound to it (engine-keys.ts).
    const found = new Map(
      (await f.tx.runsByIdempotencyKeys(rows.map((row) => itemKey(v, row.index)))).map((r) => [r.idempotency_key, r]),
    );
    for (const row of rows) {
      const key = itemKey(v, row.index);
      const existing = found.get(key);
      const foreign = existing ? ownRunProblem(existing, key, { parent: parentLink(rs.run, v, row.index) }) : null;
      if (foreign) {
        // Before this window starts anything: the items running are those of earlier windows.
        visitAttempt(rs, v).failForGood(KEY_TAKEN, { message: foreign, reason: KEY_TAKEN }, f.now, f.o.random);
        await this.cancelItems(rs, v);
        return false;
      }
    }
    const make = await itemRunMaker(f, rs, v);
    const updates: MapItemUpdate[] = [];
    for (const row of rows) {
      c.next = row.index + 1;
      const existing = found.get(itemKey(v, row.index));
      if (existing) {
        // The item's own run (started in a transaction whose item row update was lost): bound again.
        updates.push({
          key: vkey,
          index: row.index,
          state: "RUNNING",
          child_run_id: existing.run_id,
          started_at: f.now,
        });
        c.running += 1;
        continue;
      }
      const run_id = uuidv7(f.now);
      const making = make(row, run_id);
      const made = making instanceof Promise ? await making : making;
      if ("error" in made) {
        updates.push({
          key: vkey,
          index: row.index,
          state: "FAILED",
          error: made.error,
          started_at: f.now,
          ended_at: f.now,
        });
        c.failed += 1;
        this.toAdvance.set(v.execution_id, { rs, v }); // within its tolerance or past it: decided next round
        continue;
      }
      const child = startRunState(made.run, made.workflow.graph, f.now);
      child.run.deadline_at = Math.min(child.run.deadline_at, made.deadline_at); // the parent's TTL bounds its items
      f.addRun(child);
      updates.push({ key: vkey, index: row.index, state: "RUNNING", child_run_id: run_id, started_at: f.now });
      c.running += 1;
    }
    await f.tx.updateMapItems(updates);
    return true;
  }

  /**
   * Items that hold their own attempts: made ready to claim, in this flush by this engine's
   * claims step (engine/writer/claims.ts, as readied visits), or later by any engine or worker
   * serving their agent.
   */
  private async readyItems(rs: RunState, v: Visit, rows: { index: number; item: Json }[]): Promise<boolean> {
    const f = this.f;
    const c = v.items as MapCounts;
    f.work.startsLeft -= rows.length;
    // PENDING rows the map did not start hold nothing yet: made here, not read again.
    const loaded = await f.keepItems(rows.map((r) => pendingItem(v, r.index, r.item)));
    for (const { item } of loaded) {
      c.next = item.row.index + 1;
      c.running += 1;
      readyItem(rs, item, f.now);
    }
    return true;
  }

  /**
   * Cancels the items still running of a map visit that ended (compensating when the run's ending
   * does), at most what this flush may still cancel: the next flush cancels the next ones
   * (`continue_map`), so a cancel is answered at once however many items run.
   */
  private async cancelItems(rs: RunState, v: Visit, compensate = rs.changes.undo): Promise<void> {
    const f = this.f;
    // Once per flush (its rounds go on until nothing follows); an execution_id is never a run id.
    if (this.cancelling.has(v.execution_id)) return;
    this.cancelling.add(v.execution_id);
    const c = v.items;
    // A cancelled visit holds its holder until its attempt returns (compensation waits for it):
    // with nothing running, it has returned.
    if (!c || c.running <= 0) return visitAttempt(rs, v).returned(v.attempt, f.now);
    const take = Math.min(c.running, Math.max(0, f.work.cancelsLeft));
    const running = take > 0 ? await f.tx.runningMapItems(keyOf(v), take) : [];
    f.work.cancelsLeft -= running.length;
    for (const run_id of running) this.children.cancel(run_id, compensate);
    // Items holding their attempts end now: a running one's signal is aborted, its result fenced.
    await f.writeItems();
    const rows = await f.tx.activeMapItems(keyOf(v), Math.max(0, Math.min(c.running, f.work.cancelsLeft)));
    f.work.cancelsLeft -= rows.length;
    for (const fresh of rows) {
      // The copy this flush holds, if any, is the one the rest of the flush sees.
      const row = rs.items?.get(itemExecutionId(v.execution_id, fresh.index))?.row ?? fresh;
      if (row.state === "RUNNING") {
        f.out.aborted.push([itemExecutionId(v.execution_id, row.index), "cancelled"]);
      }
      itemMoves.cancel(rs, v, row, f.now);
    }
    if (rows.length > 0 && c.running <= 0) return visitAttempt(rs, v).returned(v.attempt, f.now);
    if (running.length < c.running) {
      this.continued.set(v.execution_id, { kind: "continue_map", execution_id: v.execution_id, step: "cancel" });
    }
  }

  /**
   * Gives an ended item run's end to its row and its map visit's counts (`prs`: the map's run);
   * the map goes on in `round`, once per round for all its items that ended.
   */
  async childEnded(prs: RunState, child: RunState): Promise<void> {
    const f = this.f;
    const parent = child.run.parent;
    if (parent?.item === undefined) return;
    const run = child.run;
    const state: MapItemState =
      run.status === "SUCCEEDED" ? "SUCCEEDED" : run.status === "FAILED" ? "FAILED" : "CANCELLED";
    const key = { run_id: parent.run_id, node_id: parent.node_id, visit: parent.visit };
    // A child of each.workflow_id is the item itself (one level): its run's output. An item run of
    // the map's item workflow (`<workflow_id>/<node_id>`) wraps its node's output under the node id.
    const own = !run.workflow_id.includes(ITEM_SEPARATOR);
    const output =
      state === "SUCCEEDED" ? (own ? run.output : (child.current.get(parent.node_id)?.output ?? null)) : null;
    this.itemEnds.push({ key, index: parent.item, state, output, error: run.error, ended_at: run.ended_at ?? f.now });
    const a = attemptOf(prs, executionId(parent.run_id, parent.node_id, parent.visit));
    if (a?.kind !== "visit" || !a.current || a.row.attempt !== parent.attempt || a.row.holder !== MAP_HOLDER) return;
    const v = a.row;
    const c = v.items as MapCounts;
    c.running -= 1;
    c[state === "SUCCEEDED" ? "succeeded" : state === "FAILED" ? "failed" : "cancelled"] += 1;
    a.touched();
    if (v.state === "RUNNING") this.toAdvance.set(v.execution_id, { rs: prs, v });
    // The map was cancelled while this item ran: its attempt has returned once the last item has.
    else if (c.running <= 0) a.returned(v.attempt, f.now);
  }

  /** Writes the item ends of this round at once, then lets each map they belong to go on; true when there were any. */
  async round(): Promise<boolean> {
    const f = this.f;
    // Maps an item of which (one holding its attempts) ended: a result, an expiry, a cancel.
    for (const rs of f.states.values()) {
      const ended = rs.changes.items?.ended;
      if (!ended) continue;
      for (const v of ended) {
        if (v.state === "RUNNING" && v.holder === MAP_HOLDER) this.toAdvance.set(v.execution_id, { rs, v });
      }
      ended.clear();
    }
    if (this.itemEnds.length === 0 && this.toAdvance.size === 0) return false;
    await f.tx.updateMapItems(this.itemEnds.splice(0));
    await f.writeItems(); // before a map reads its rows (its output, its failed items)
    const maps = [...this.toAdvance.values()];
    this.toAdvance.clear();
    for (const { rs, v } of maps) {
      if (v.state === "RUNNING" && v.holder === MAP_HOLDER) await this.advance(rs, v);
    }
    return true;
  }

  /**
   * Compensating runs whose next row undoes a map's items (`map`, DESIGN §11.1): the engine holds
   * the row and undoes the items that succeeded, newest first, one at a time: each item run
   * compensates (`undoRun`), and once it ended the next one starts; the last ends the row. True
   * when it changed anything. Reached whenever such a run is loaded (an item's end loads it; the
   * sweep loads compensating runs).
   */
  async undo(): Promise<boolean> {
    const f = this.f;
    let changed = false;
    for (const rs of [...f.states.values()]) {
      if (rs.run.status !== "COMPENSATING") continue;
      const ready = claimableCompensation(rs, f.now);
      if (ready?.agent_type === MAP_HOLDER) {
        compensationAttempt(rs, ready).claim(MAP_HOLDER, f.now);
        ready.deadline_at = null; // each item's compensation has its own deadline
        ready.lease_expires_at = null;
        changed = true;
      }
      const row = rs.compensations.find((c) => c.state === "RUNNING" && c.holder === MAP_HOLDER);
      if (row && (await this.undoNext(rs, row))) changed = true;
    }
    return changed;
  }

  /**
   * Starts undoing the next item of the row's map visit, or ends the row; true when it changed
   * anything. The item being undone is the row's `output.undoing` until its run ended.
   */
  private async undoNext(rs: RunState, row: Compensation): Promise<boolean> {
    const f = this.f;
    const key = { run_id: row.run_id, node_id: row.node_id, visit: row.visit };
    const a = compensationAttempt(rs, row);
    const current = (row.output as { undoing?: string } | null)?.undoing;
    if (current) {
      const item = await f.load(current);
      if (!item || item.run.status === "COMPENSATING") return false; // busy elsewhere, or still undoing
      if (item.run.needs_attention) {
        const message = `undoing item ${item.run.parent?.item} of map ${row.node_id} failed: see its run ${current}`;
        a.failForGood("compensation_failed", { message, reason: "compensation_failed" }, f.now, f.o.random);
        return true;
      }
    }
    for (;;) {
      const next = await f.tx.newestSucceededMapItem(key);
      if (next === null) {
        a.succeed({ undone: true }, { kind: "none" }, f.now);
        return true;
      }
      const item = await f.load(next);
      if (!item) return false; // another engine has it: the sweep comes back
      const why = {
        message: `undone: run ${rs.run.run_id} failed and its map ${row.node_id} undoes its items`,
        reason: "undone",
      };
      if (undoRun(item, why, f.now)) {
        row.output = { undoing: next };
        a.touched();
        return true;
      }
      // Nothing in it to undo: count it as undone, and go on to the next.
      await f.tx.updateMapItems([{ key, index: item.run.parent?.item ?? -1, state: "CANCELLED", ended_at: f.now }]);
    }
  }
}

function keyOf(v: Visit): VisitKey {
  return { run_id: v.run_id, node_id: v.node_id, visit: v.visit };
}

/**
 * Whether the map's items hold their own attempts in their rows (`itemsAreRows`), not child runs.
 * Under a budget they are child runs still: a budget's reservations are taken, released and
 * checked for stale ones by visit (budget.ts), and an item's attempt is not a visit.
 */
function holdsAttempts(rs: RunState, v: Visit): boolean {
  return itemsAreRows(v.payload) && budgetedRuns(rs.run).length === 0;
}

/** A PENDING item row as `insertMapItems` wrote it: nothing started, nothing held. */
function pendingItem(v: Visit, index: number, item: Json): MapItem {
  return {
    run_id: v.run_id,
    node_id: v.node_id,
    visit: v.visit,
    index,
    item,
    state: "PENDING",
    child_run_id: null,
    output: null,
    error: null,
    started_at: null,
    ended_at: null,
    agent_type: null,
    attempt: 0,
    failures: 0,
    interruptions: 0,
    priority: v.priority,
    ready_at: null,
    deadline_at: null,
    lease_expires_at: null,
    holder: null,
  };
}
