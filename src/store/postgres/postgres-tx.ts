/**
 * The operations of one PostgreSQL transaction (StoreTx). Round trips are what costs here: the
 * runs a transaction locks are read with its BEGIN (postgres-store.ts), a write batch is one
 * statement whatever its size (write.ts), every other method is one statement, and statements
 * are prepared once per connection (`name`). The statements live in the facets (runs.ts,
 * claims.ts, due.ts, engines.ts, inbox.ts, ...); this class is built per transaction and only
 * routes to them, through prototype methods, so that it costs no closure more than it did.
 */
import type { Run, Visit } from "../../core/types.js";
import type { ConcurrencyGroup, RateBucket } from "../claims.js";
import type { InboxTx } from "../inbox.js";
import type { MapTx } from "../map-items.js";
import type { PruneTx } from "../prune.js";
import type { KeyedRun, KnownRevisions, RunRead, VisitKey, WriteBatch, Written } from "../runs.js";
import type { ScheduleTx } from "../schedules.js";
import type { StepsTx } from "../steps.js";
import type { StoreTx } from "../store.js";
import * as claims from "./claims.js";
import * as due from "./due.js";
import * as engines from "./engines.js";
import { postgresInbox } from "./inbox.js";
import { postgresMapItems } from "./map-items.js";
import { postgresPrune } from "./prune.js";
import * as runs from "./runs.js";
import { postgresSchedules } from "./schedules.js";
import type { Session } from "./session.js";
import { postgresSteps } from "./steps.js";
import { type TxWrite, write } from "./write.js";

export class PostgresTx implements StoreTx, TxWrite, engines.EngineWatch {
  private ended = false;
  private readonly events: InboxTx = postgresInbox((config, values) => this.q(config, values));
  readonly waitingEvents: InboxTx["waitingEvents"] = (runId, name, limit) =>
    this.events.waitingEvents(runId, name, limit);
  readonly inboxSize: InboxTx["inboxSize"] = (runId) => this.events.inboxSize(runId);
  readonly keyedEvents: InboxTx["keyedEvents"] = (name, key, since) => this.events.keyedEvents(name, key, since);
  readonly inboxByIdempotencyKey: InboxTx["inboxByIdempotencyKey"] = (scope, key) =>
    this.events.inboxByIdempotencyKey(scope, key);
  readonly writeInbox: InboxTx["writeInbox"] = (rows) => this.events.writeInbox(rows);
  readonly pruneKeyed: InboxTx["pruneKeyed"] = (before) => this.events.pruneKeyed(before);
  private readonly stepRows: StepsTx = postgresSteps((config, values) => this.q(config, values));
  readonly recordSteps: StepsTx["recordSteps"] = (rows) => this.stepRows.recordSteps(rows);
  readonly copySteps: StepsTx["copySteps"] = (from, to) => this.stepRows.copySteps(from, to);
  private readonly items: MapTx = postgresMapItems((config, values) => this.q(config, values));
  readonly insertMapItems: MapTx["insertMapItems"] = (key, items, now, priority, offset) =>
    this.items.insertMapItems(key, items, now, priority, offset);
  readonly pendingMapItems: MapTx["pendingMapItems"] = (key, from, limit) =>
    this.items.pendingMapItems(key, from, limit);
  readonly updateMapItems: MapTx["updateMapItems"] = (updates) => this.items.updateMapItems(updates);
  readonly failedMapItems: MapTx["failedMapItems"] = (key, limit) => this.items.failedMapItems(key, limit);
  readonly runningMapItems: MapTx["runningMapItems"] = (key, limit) => this.items.runningMapItems(key, limit);
  readonly heldMaps: MapTx["heldMaps"] = (limit) => this.items.heldMaps(limit);
  readonly newestSucceededMapItem: MapTx["newestSucceededMapItem"] = (key) => this.items.newestSucceededMapItem(key);
  readonly mapOutput: MapTx["mapOutput"] = (key, maxBytes) => this.items.mapOutput(key, maxBytes);
  readonly mapItemsToSettle: MapTx["mapItemsToSettle"] = (limit) => this.items.mapItemsToSettle(limit);
  readonly loadMapItems: MapTx["loadMapItems"] = (keys) => this.items.loadMapItems(keys);
  readonly writeMapItems: MapTx["writeMapItems"] = (rows) => this.items.writeMapItems(rows);
  readonly activeMapItems: MapTx["activeMapItems"] = (key, limit) => this.items.activeMapItems(key, limit);
  readonly claimableMapItems: MapTx["claimableMapItems"] = (agentType, now, limit) =>
    this.items.claimableMapItems(agentType, now, limit);
  readonly expiredMapItems: MapTx["expiredMapItems"] = (now, limit) => this.items.expiredMapItems(now, limit);
  readonly mapItemsHeldBy: MapTx["mapItemsHeldBy"] = (holders, limit) => this.items.mapItemsHeldBy(holders, limit);
  private readonly pruning: PruneTx = postgresPrune((config, values) => this.q(config, values));
  readonly pruneRuns: PruneTx["pruneRuns"] = (cut, limit) => this.pruning.pruneRuns(cut, limit);
  readonly countPrunable: PruneTx["countPrunable"] = (cut) => this.pruning.countPrunable(cut);
  private readonly schedules: ScheduleTx = postgresSchedules((config, values) => this.q(config, values));
  readonly lockSchedule: ScheduleTx["lockSchedule"] = (id) => this.schedules.lockSchedule(id);
  readonly writeSchedule: ScheduleTx["writeSchedule"] = (schedule) => this.schedules.writeSchedule(schedule);
  readonly deleteSchedule: ScheduleTx["deleteSchedule"] = (id) => this.schedules.deleteSchedule(id);
  readonly dueSchedules: ScheduleTx["dueSchedules"] = (now, limit) => this.schedules.dueSchedules(now, limit);
  readonly unfinishedScheduleRuns: ScheduleTx["unfinishedScheduleRuns"] = (id, limit) =>
    this.schedules.unfinishedScheduleRuns(id, limit);
  readonly advanceSchedule: ScheduleTx["advanceSchedule"] = (id, to) => this.schedules.advanceSchedule(id, to);

  constructor(
    private readonly session: Session,
    /** The transaction's time: the database's, read at BEGIN, or the injected clock's. */
    readonly time: () => number,
    /** The NOTIFY channel of the store's schema. */
    private readonly channel: string,
    /** The store's schema (it names the engines' liveness locks). */
    readonly schema: string,
    /**
     * Other engines seen with their lock free, since when (the store's, kept between
     * transactions); null while the store's own listener is down: no engine is judged by its lock.
     */
    readonly lockFree: Map<string, number> | null,
    /** The runs locked as the transaction began, read in the same round trip. */
    private readonly locked: ReadonlyMap<string, RunRead> = new Map(),
    /** Those of them locked by `tryLock` (the ones no other transaction held). */
    private readonly tried: readonly RunRead[] = [],
  ) {}

  /** Called when the transaction ends: a tx kept past its transaction must not run statements on a reused connection. */
  end(): void {
    this.ended = true;
  }

  async q<R extends object>(config: { name?: string; text: string }, values: unknown[]): Promise<R[]> {
    if (this.ended) throw new Error("skein: a store transaction was used after it ended");
    const result = await this.session.query<R & Record<string, unknown>>({ ...config, values });
    return result.rows;
  }

  async qCommit<R extends object>(config: { name?: string; text: string }, values: unknown[]): Promise<R[]> {
    if (this.ended) throw new Error("skein: a store transaction was used after it ended");
    this.ended = true;
    return (await this.session.commitWith({ ...config, values })).rows as R[];
  }

  async now(): Promise<number> {
    return this.time();
  }

  write(batch: WriteBatch, options: { last?: boolean } = {}): Promise<Written> {
    return write(this, this.channel, batch, options.last);
  }

  takeDeadEngines(self: string, staleBefore: number): Promise<string[]> {
    return engines.takeDeadEngines(this, this, self, staleBefore);
  }
  lastHeartbeats(engineIds: string[]): Promise<Map<string, number>> {
    return engines.lastHeartbeats(this, engineIds);
  }
  runByIdempotencyKey(key: string): Promise<Run | null> {
    return runs.runByIdempotencyKey(this, key);
  }
  keyedRuns(workflowId: string, key: string, limit: number): Promise<KeyedRun[]> {
    return runs.keyedRuns(this, this.channel, workflowId, key, limit);
  }

  anyQueued(): Promise<boolean> {
    return runs.anyQueued(this, this.channel);
  }
  runsByIdempotencyKeys(keys: string[]): Promise<Run[]> {
    return runs.runsByIdempotencyKeys(this, keys);
  }
  raiseTreeRuns(rootRunId: string, count: number, limit: number): Promise<number | null> {
    return runs.raiseTreeRuns(this, rootRunId, count, limit);
  }
  runBudgets(runIds: string[]): Promise<Pick<Run, "run_id" | "usage" | "budget">[]> {
    return runs.runBudgets(this, runIds);
  }
  loadRuns(runIds: string[], known?: KnownRevisions): Promise<RunRead[]> {
    return runs.loadRuns(this, this.locked, runIds, known);
  }
  async tryLocked(): Promise<RunRead[]> {
    return [...this.tried];
  }
  loadRun(runId: string, options?: { skipLocked?: boolean; known?: number }): Promise<RunRead | null> {
    return runs.loadRun(this, runId, options);
  }
  runHistory(runId: string): Promise<{ visit: Visit; successSeq: number | null }[]> {
    return runs.runHistory(this, runId);
  }
  compensatingRuns(limit: number): Promise<string[]> {
    return runs.compensatingRuns(this, limit);
  }
  getVisit(key: VisitKey): Promise<Visit | null> {
    return runs.getVisit(this, key);
  }
  claimable(agentType: string, now: number, limit: number, skip?: readonly ConcurrencyGroup[]): Promise<VisitKey[]> {
    return claims.claimable(this, agentType, now, limit, skip);
  }
  claimableCompensations(agentType: string, now: number, limit: number): Promise<string[]> {
    return claims.claimableCompensations(this, agentType, now, limit);
  }
  countRunningForLimits(agentTypes: string[], except: string[]): Promise<Map<string, number>> {
    return claims.countRunningForLimits(this, this.channel, agentTypes, except);
  }
  countRunningByKey(workflowId: string, nodeId: string, key: string, except: string[]): Promise<number> {
    return claims.countRunningByKey(this, this.channel, workflowId, nodeId, key, except);
  }
  rateBuckets(agentTypes: string[]): Promise<Map<string, RateBucket>> {
    return claims.rateBuckets(this, this.channel, agentTypes);
  }
  writeRateBuckets(buckets: Map<string, RateBucket>): Promise<void> {
    return claims.writeRateBuckets(this, buckets);
  }
  holdAgentType(agentType: string, until: number): Promise<void> {
    return claims.holdAgentType(this, this.channel, agentType, until);
  }
  rateHolds(now: number): Promise<Map<string, number>> {
    return claims.rateHolds(this, now);
  }
  unresolved(now: number, limit: number): Promise<VisitKey[]> {
    return due.unresolved(this, now, limit);
  }
  expiredAttempts(now: number, limit: number): Promise<VisitKey[]> {
    return due.expiredAttempts(this, now, limit);
  }
  attemptsHeldBy(holders: string[], limit: number): Promise<VisitKey[]> {
    return due.attemptsHeldBy(this, holders, limit);
  }
  expiredHolds(now: number, limit: number): Promise<VisitKey[]> {
    return due.expiredHolds(this, now, limit);
  }
  childrenToSettle(limit: number): Promise<string[]> {
    return due.childrenToSettle(this, limit);
  }
  orphanedChildren(limit: number): Promise<string[]> {
    return due.orphanedChildren(this, limit);
  }
  expiredRuns(now: number, limit: number): Promise<string[]> {
    return due.expiredRuns(this, now, limit);
  }
  nextDue(now: number): Promise<number | null> {
    return due.nextDue(this, this.lockFree, now);
  }
}
