/**
 * Claims, in the flush's transaction: ready visits, map items and compensation rows for this
 * engine's agents within its limits (`claimReady`), for external workers (`claimForWorkers`), and
 * the tasks they are handed, each agent type's work by priority, then age (`claimInOrder`).
 * Kinds the engine starts itself (a review, a wait) begin here too. Every claim goes through the
 * one attempt lifecycle (core/attempt.ts).
 */
import { type Attempt, compensationAttempt, isClaimable, itemAttempt, visitAttempt } from "../../core/attempt.js";
import { usageRuns } from "../../core/budget.js";
import { claimableCompensation, undoneExecutionId } from "../../core/compensation.js";
import { beginVisit, nodeOf, type RunState } from "../../core/scheduler.js";
import type { Compensation, Json, MapItem, Visit } from "../../core/types.js";
import { ENGINE_STARTED, kindOf } from "../../definition/kinds/index.js";
import { itemWorkflowId } from "../registry.js";
import type { Budget } from "./budget.js";
import type { FlushContext } from "./context.js";
import type { ClaimedTask, ClaimInput } from "./inputs.js";
import { SWEEP_BATCH } from "./inputs.js";
import type { KindStep } from "./kinds/step.js";
import { type ClaimLimits, freedLimitedTypes, limitOf } from "./limits.js";

/** Claim queries per agent type in one flush: each after the first skips the keys the one before found full. */
const CLAIM_ROUNDS = 4;

/** Ready work a claim of one agent type chooses among: a visit of a run, or a map item's attempt. */
type Ready = { rs: RunState; v: Visit } | { item: Attempt };

const rowOf = (r: Ready): Visit | MapItem => ("v" in r ? r.v : (r.item.row as MapItem));

/**
 * Claim order (DESIGN §17): lower priority first, then the longest ready; what the claim queries'
 * ORDER BY priority, ready_at gives, so work in hand and the database's interleave.
 */
function claimOrder(x: Ready, y: Ready): number {
  const a = rowOf(x);
  const b = rowOf(y);
  return a.priority - b.priority || (a.ready_at ?? 0) - (b.ready_at ?? 0);
}

/** Still ready to claim (in memory, which may be ahead of the database): not claimed since, its run not paused. */
function stillReady(r: Ready, now: number): boolean {
  if ("item" in r)
    return r.item.current && r.item.rs.run.paused === null && isItemClaimable(r.item.row as MapItem, now);
  return r.rs.run.paused === null && isClaimable(r.v, now);
}

/** The flush's claims step: the ready visits other engines told of, and external workers' claims, until they are taken. */
export class Claims {
  /** External workers' claims of this flush: applied together, after the other inputs. */
  private readonly workerClaims: ClaimInput[] = [];
  /** Ready visits other engines told of, in runs this transaction locked (`takeHints`). */
  private readonly hinted: [RunState, Visit][] = [];

  constructor(
    private readonly f: FlushContext,
    /** What the concurrency limits leave room for, across engines. */
    private readonly limits: ClaimLimits,
    private readonly budget: Budget,
    /** The kinds whose steps start runs (kinds/index.ts): claimed while the flush may still start runs (bounded-work.ts). */
    private readonly startsRuns: ReadonlyMap<string, KindStep>,
  ) {}

  /** Queues an external worker's claim for `claimForWorkers`. */
  queue(claim: ClaimInput): void {
    this.workerClaims.push(claim);
  }

  /**
   * Runs another engine said have ready visits of this engine's agent types (a NOTIFY that
   * named them): those the transaction locked as it began (no other held them) were read then,
   * and their ready visits are claimed with those this flush makes ready, without asking the
   * database. A run another transaction held is left to the claimable query: its agent types go
   * to the backlog.
   */
  async takeHints(): Promise<void> {
    const f = this.f;
    if (f.hints.size === 0) return;
    for (const read of await f.tx.tryLocked()) {
      if (!f.states.has("run" in read ? read.run.run_id : read.run_id)) await f.take(read);
    }
    for (const [runId, types] of f.hints) {
      const rs = f.states.get(runId);
      if (!rs) {
        for (const type of types) f.backlog.add(type);
        continue;
      }
      for (const v of rs.current.values()) {
        if (types.has(v.agent_type) && rs.run.paused === null && isClaimable(v, f.now)) this.hinted.push([rs, v]);
      }
    }
  }

  /** Map items in hand that may be claimed: made ready by this flush, their map still holding them, their run not paused. */
  private *itemsInHand(): Generator<Attempt> {
    const f = this.f;
    for (const rs of f.states.values()) {
      if (rs.run.paused !== null) continue;
      for (const item of rs.changes.items?.readied ?? []) {
        const map = rs.current.get(item.row.node_id);
        const a = map ? itemAttempt(rs, item, map) : undefined;
        if (a?.current && isItemClaimable(item.row, f.now)) yield a;
      }
    }
  }

  /**
   * Ready visits in hand: made ready by this flush, or told of by another engine. Not those of a
   * paused run (DESIGN §16), which may have been paused by this very flush, ahead of the database.
   */
  private *inHand(): Generator<[RunState, Visit]> {
    const f = this.f;
    for (const rs of f.states.values()) {
      if (rs.run.paused === null) for (const v of rs.changes.readied) yield [rs, v];
    }
    for (const hint of this.hinted) if (hint[0].run.paused === null) yield hint;
  }

  /**
   * How much this flush has made ready or been told of so far (visits, items, hints): it only
   * grows, so a claims pass that made it grow made more ready in hand (a visit its budget stops
   * fails, and its failure edge readies the next node), to be offered in another pass.
   */
  private handSize(): number {
    let n = this.hinted.length;
    for (const rs of this.f.states.values()) n += rs.changes.readied.length + (rs.changes.items?.readied.length ?? 0);
    return n;
  }

  /** The ready visits and map items in hand (`inHand`, `itemsInHand`), by agent type. */
  private handByType(): Map<string, Ready[]> {
    const byType = new Map<string, Ready[]>();
    const add = (type: string, r: Ready) => {
      const list = byType.get(type);
      if (list) list.push(r);
      else byType.set(type, [r]);
    };
    for (const [rs, v] of this.inHand()) if (isClaimable(v, this.f.now)) add(v.agent_type, { rs, v });
    for (const a of this.itemsInHand()) add(a.agentType, { item: a });
    return byType;
  }

  /**
   * Ready visits this engine leaves waiting (no handler here, or over its limits) and new runs
   * of a client: external workers waiting for those types hear of them after commit, and other
   * engines at once (PostgreSQL NOTIFY).
   */
  notifyOthers(): void {
    const f = this.f;
    // By agent type: the runs to look in, or null: look in the database.
    const ready = new Map<string, Set<string> | null>();
    const add = (type: string, runId: string | null) => {
      const runs = ready.get(type);
      if (runs === null) return; // already: look in the database
      ready.set(type, runId === null ? null : (runs ?? new Set<string>()).add(runId));
    };
    for (const rs of f.states.values()) {
      if (rs.run.paused !== null) continue; // resumed, its ready visits are announced then
      for (const v of rs.changes.readied) {
        if (isClaimable(v, f.now)) add(v.agent_type, rs.run.run_id);
        // A client resolves no templates: an engine's sweep does, so wake one up.
        else if (!f.claiming && v.payload === null && v.state === "PENDING") add("*", null);
      }
      // Compensation rows are found by the sweep's query, not from a run id.
      const c = claimableCompensation(rs, f.now);
      if (c) add(c.agent_type, null);
    }
    // Map items this flush made ready and did not claim: found by the claimable items query.
    for (const a of this.itemsInHand()) add(a.agentType, null);
    // A limited type's attempt ended: a visit over the limit may now be claimed, by any engine or worker.
    for (const type of freedLimitedTypes(f)) add(type, null);
    // Tokens an attempt did not use went back to its type's window: a visit waiting for them may start.
    for (const type of this.limits.rates.freed) add(type, null);
    f.out.waiting = [...ready.keys()].filter((t) => t !== "*");
    if (!f.o.store.exclusive) {
      f.notify = [...ready].map(([agentType, runs]) => ({ agentType, runIds: runs ? [...runs] : [] }));
    }
  }

  /**
   * External workers' claims, all at once after the flush's other inputs, with one query of each
   * kind per agent type for every claim of the flush: each type's ready work in claim order
   * (`claimInOrder`: what this flush holds, not written yet, merged with the database's), then
   * what failed runs have to undo with it. Each claim takes up to its `max`, in the order the
   * claims arrived; the lease is the worker's, never past the deadline.
   */
  async claimForWorkers(): Promise<void> {
    const f = this.f;
    const claims = this.workerClaims.splice(0);
    if (claims.length === 0) return;
    const tasks = new Map(claims.map((c) => [c, [] as ClaimedTask[]]));
    const room = (c: ClaimInput) => c.max - (tasks.get(c)?.length ?? 0);
    // The claim set the node's lease (deadline, heartbeat_timeout); the worker's may only shorten it.
    const take = async (c: ClaimInput, a: Attempt) => {
      a.claim(c.holder, f.now);
      a.row.lease_expires_at = Math.min(a.row.lease_expires_at ?? Number.POSITIVE_INFINITY, f.now + c.lease_ms);
      const tokens = this.limits.took(a);
      tasks.get(c)?.push(withTokens(await taskOf(f, a), tokens));
    };
    // Within its type's token window (the first that does not fit stops its type for this flush).
    const takeIfAdmitted = async (c: ClaimInput, a: Attempt) => {
      if (await this.limits.admits(a)) await take(c, a);
    };
    // The first claim with room that asked for the type, while the type's limit leaves room.
    const taker = async (agentType: string) => {
      const c = claims.find((c) => room(c) > 0 && c.agent_types.includes(agentType));
      return c && (await this.limits.room(agentType)) > 0 ? c : undefined;
    };
    // A visit its node's `concurrency` holds back waits ready (its node's key is full); one a budget stops fails.
    const takeVisit = async (c: ClaimInput, rs: RunState, v: Visit) => {
      if (await this.budget.stops(rs, v)) return;
      const a = visitAttempt(rs, v);
      // Held for its budget (reserved by attempts in flight): looked for again when one ends.
      if (
        (await this.limits.nodeAllows(rs, v)) &&
        (await this.limits.admits(a)) &&
        (await this.budget.reserveFor(rs, v))
      )
        await take(c, a);
    };
    const wanted = async (type: string) => {
      const asked = claims.reduce((n, c) => n + (c.agent_types.includes(type) ? Math.max(0, room(c)) : 0), 0);
      return asked === 0 ? 0 : Math.min(asked, Math.max(0, await this.limits.room(type)));
    };
    const types = new Set(claims.flatMap((c) => c.agent_types));
    const claim = async (r: Ready) => {
      const c = await taker("v" in r ? r.v.agent_type : r.item.agentType);
      if (c && "item" in r) await takeIfAdmitted(c, r.item);
      else if (c && "v" in r) await takeVisit(c, r.rs, r.v);
    };
    // The database is asked in the first pass; what claims make ready in hand is offered in
    // another, until they make nothing more ready.
    for (let size = -1, pass = 0; size !== this.handSize(); pass++) {
      size = this.handSize();
      const hand = this.handByType();
      for (const type of types) {
        await this.claimInOrder(type, pass === 0, hand.get(type) ?? [], () => wanted(type), claim);
      }
    }
    for (const type of types) {
      // Then what failed runs have to undo with this agent type: a row in hand, then the
      // database's, one row per run at a time.
      for (const rs of f.states.values()) {
        const row = claimableCompensation(rs, f.now);
        const c = row?.agent_type === type ? await taker(type) : undefined;
        if (row && c) await takeIfAdmitted(c, compensationAttempt(rs, row));
      }
      const more = await wanted(type);
      if (more === 0) continue;
      const runIds = await f.tx.claimableCompensations(type, f.now, more);
      await f.preload(runIds);
      for (const runId of runIds) {
        const rs = await f.load(runId);
        const row = rs ? claimableCompensation(rs, f.now) : null;
        const c = row?.agent_type === type ? await taker(type) : undefined;
        if (rs && row && c) await takeIfAdmitted(c, compensationAttempt(rs, row));
      }
    }
    for (const c of claims) f.out.callbacks.push(() => c.done.resolve(tasks.get(c) ?? []));
  }

  /**
   * Claims ready work for this engine's agents within the concurrency limits, each agent type's
   * in claim order (`claimInOrder`): the visits and map items this flush made ready, not written
   * yet, merged with those already waiting in the database; everything is written once,
   * claimed, by the persist that follows. Then compensating runs' next rows.
   *
   * The database is asked only for agent types in the backlog (ready visits left waiting by an
   * earlier flush), or for every type on a sweep, which also catches retries that fell due.
   */
  async claimReady(sweep: boolean): Promise<void> {
    const f = this.f;
    const backlog = f.backlog;
    const inFlight = f.o.hooks.inFlight();
    let free = f.o.maxConcurrency - inFlight.total;
    const taken = new Map<string, number>();
    // The limit holds across the database (`this.limits`) and in this process too: an attempt this
    // engine cancelled may still be running here while its row says CANCELLED.
    const room = async (type: string) => {
      // Started by the engine, not attempts: no concurrency limit; runs, as many as the flush may still start.
      if (kindOf(type).start === "engine")
        return this.startsRuns.has(type) ? Math.max(0, f.work.startsLeft) : SWEEP_BATCH;
      const limit = limitOf(f.o.agentConcurrency, type);
      const here = limit === undefined ? free : limit - (inFlight.byType.get(type) ?? 0) - (taken.get(type) ?? 0);
      return Math.min(free, here, await this.limits.room(type)); // no database read for a type without limits
    };
    const take = async (a: Attempt) => {
      a.claim(f.o.engineId, f.now);
      const tokens = this.limits.took(a);
      f.out.claimed.push(withTokens(await taskOf(f, a), tokens));
      free -= 1;
      taken.set(a.agentType, (taken.get(a.agentType) ?? 0) + 1);
    };
    // Within its type's token window; one that does not fit waits (for the wake-up when the
    // window has room), and its type's later ones with it.
    const refused = new Set<string>();
    const takeIfAdmitted = async (a: Attempt) => {
      if (await this.limits.admits(a)) await take(a);
      else refused.add(a.agentType);
    };
    const claim = async (r: Ready) => {
      if ("item" in r) return takeIfAdmitted(r.item);
      const { rs, v } = r;
      const { kind } = nodeOf(rs, v.node_id);
      // A kind the engine starts itself (a review, a wait) holds no attempt and takes no room.
      if (kind.start === "engine") await beginVisit(rs, v, f.now, f.tx);
      else if (await this.budget.stops(rs, v))
        return; // failed budget_exceeded: no attempt starts
      else if (!(await this.limits.nodeAllows(rs, v)))
        return; // its node's key is full: claimed when one of its attempts ends (freedLimitedTypes)
      else {
        const a = visitAttempt(rs, v);
        if (!(await this.limits.admits(a))) refused.add(v.agent_type);
        // Held for its budget (reserved by attempts in flight): looked for again when one ends.
        else if (await this.budget.reserveFor(rs, v)) await take(a);
      }
    };
    const types = [...f.o.agentTypes().filter((t) => !ENGINE_STARTED.includes(t)), ...ENGINE_STARTED];
    // The database is asked in the first pass; what claims make ready in hand is offered in
    // another, until they make nothing more ready.
    for (let size = -1, pass = 0; size !== this.handSize(); pass++) {
      size = this.handSize();
      const hand = this.handByType();
      for (const type of types) {
        const inHand = hand.get(type) ?? [];
        const ask = pass === 0 && (sweep || backlog.has(type));
        if (!ask && inHand.length === 0) continue;
        const done = await this.claimInOrder(type, ask, inHand, () => room(type), claim);
        if (!done || refused.has(type)) backlog.add(type);
        else if (ask) backlog.delete(type); // none waits in the database
      }
    }
    for (const rs of f.states.values()) {
      // A compensating run's next row; one left over a limit is found again by the sweep.
      // A row the engine itself runs (`map`: undoing a map's items, engine/writer/kinds/maps.ts) is no agent's.
      const c = claimableCompensation(rs, f.now);
      const byAgent = c !== null && kindOf(c.agent_type).start === "agent";
      if (c && byAgent && types.includes(c.agent_type) && (await room(c.agent_type)) > 0)
        await takeIfAdmitted(compensationAttempt(rs, c));
    }
    for (const type of refused) backlog.add(type);
  }

  /**
   * Offers the ready work of `type` to `claim` in claim order (DESIGN §17: priority, lower
   * first, then age), while `room` (asked before each) says there is room: `hand`, what this
   * flush holds ready, merged when `ask` with the database's ready visits and map items, the
   * first `room` of each by the same order (the claim queries' ORDER BY), so a visit in hand
   * never goes ahead of more urgent work waiting in the database, nor the other way round.
   *
   * A visit its node's `concurrency` holds back waits; a query after one that met such visits
   * leaves their keys out, so one tenant's backlog does not hold up another's visits behind it.
   * True when nothing of the type is left waiting: all of `hand` offered, and the database's
   * queries returned fewer than asked; false when room ran out first.
   */
  private async claimInOrder(
    type: string,
    ask: boolean,
    hand: Ready[],
    room: () => Promise<number>,
    claim: (r: Ready) => Promise<void>,
  ): Promise<boolean> {
    const f = this.f;
    let visitsLeft = ask; // the database may hold more ready visits of the type than it returned
    let itemsLeft = ask && kindOf(type).start === "agent"; // items are only ever an agent's
    let offer = [...hand];
    let roomLeft = true;
    for (let round = 0; round < CLAIM_ROUNDS; round++) {
      const n = await room();
      if (n <= 0) {
        roomLeft = false;
        break;
      }
      const skip = this.limits.fullKeys();
      // A hinted visit is in hand and in the database: offered once.
      const seen = visitsLeft || itemsLeft ? new Set(offer.map(rowOf)) : null;
      if (visitsLeft) {
        const keys = await f.tx.claimable(type, f.now, n, skip);
        visitsLeft = keys.length >= n;
        await f.preload([...new Set(keys.map((k) => k.run_id))]); // locked by the claim: one read for all
        for (const key of keys) {
          const rs = await f.load(key.run_id);
          const v = rs?.current.get(key.node_id);
          // The database may not know yet that this flush paused the run.
          if (rs && v && v.visit === key.visit && !seen?.has(v) && stillReady({ rs, v }, f.now)) offer.push({ rs, v });
        }
      }
      // Items have no keys to leave out: asked once.
      if (itemsLeft && round === 0) {
        const keys = await f.tx.claimableMapItems(type, f.now, n);
        itemsLeft = keys.length >= n;
        if (keys.length > 0) await f.preload([...new Set(keys.map((k) => k.run_id))]);
        for (const { rs, item } of await f.loadItems(keys)) {
          const map = rs.current.get(item.row.node_id);
          const r = map ? { item: itemAttempt(rs, item, map) } : undefined;
          if (r && !seen?.has(item.row) && stillReady(r, f.now)) offer.push(r);
        }
      }
      offer.sort(claimOrder);
      for (const r of offer) {
        if (!stillReady(r, f.now)) continue; // claimed already (it was in hand and found again)
        if ((await room()) > 0) await claim(r);
        else roomLeft = false;
      }
      offer = [];
      // Ask again only for visits past keys this round found full.
      if (!roomLeft || !visitsLeft || this.limits.fullKeys().length === skip.length) break;
    }
    return roomLeft && !visitsLeft && !itemsLeft;
  }
}

/** Ready and due (in memory, which may be ahead of the database), as `isClaimable` says of a visit. */
function isItemClaimable(row: MapItem, now: number): boolean {
  return (row.state === "PENDING" || row.state === "RETRYING") && row.ready_at !== null && row.ready_at <= now;
}

/** The task with the tokens its claim took of its type's window (rates.ts), which its result settles. */
function withTokens(task: ClaimedTask, tokens: number | null): ClaimedTask {
  if (tokens !== null) task.expected_tokens = tokens;
  return task;
}

/** The task a claimed attempt is handed. */
function taskOf(f: FlushContext, a: Attempt): Promise<ClaimedTask> {
  if (a.kind === "item") return Promise.resolve(itemTask(a));
  return a.kind === "visit" ? task(f, a.rs, a.row) : compensationTask(f, a.rs, a.row);
}

/**
 * The task of a map item's attempt: its payload, `each.payload` resolved for the item, is
 * resolved at dispatch, outside the transaction (engine/attempts/payloads.ts `item`); the
 * workflow is the map's item workflow, whose one node says how the agent is judged.
 */
function itemTask(a: Extract<Attempt, { kind: "item" }>): ClaimedTask {
  const { rs, row } = a;
  return {
    run_id: rs.run.run_id,
    node_id: row.node_id,
    agent_type: a.agentType,
    visit: row.visit,
    attempt: row.attempt,
    execution_id: a.executionId,
    payload: null,
    input: row.item,
    deps: {},
    trigger: null,
    item: { index: row.index },
    trace_id: rs.run.trace_id,
    run_traceparent: rs.run.traceparent,
    workflow_id: itemWorkflowId(rs.run.workflow_id, row.node_id),
    workflow_version: rs.run.workflow_version,
    deadline_at: row.deadline_at ?? 0,
    lease_expires_at: row.lease_expires_at,
    usage_runs: usageRuns(rs.run),
  };
}

/** The task of a compensation: the visit it undoes is `compensates`; its payload is resolved at dispatch. */
async function compensationTask(f: FlushContext, rs: RunState, c: Compensation): Promise<ClaimedTask> {
  const current = rs.current.get(c.node_id);
  const v =
    current?.visit === c.visit
      ? current
      : await f.tx.getVisit({ run_id: rs.run.run_id, node_id: c.node_id, visit: c.visit });
  return {
    run_id: rs.run.run_id,
    node_id: c.node_id,
    agent_type: c.agent_type,
    visit: c.visit,
    attempt: c.attempt,
    execution_id: c.execution_id,
    payload: null,
    input: rs.run.input,
    deps: {},
    trigger: null,
    trace_id: rs.run.trace_id,
    run_traceparent: rs.run.traceparent,
    workflow_id: rs.run.workflow_id,
    workflow_version: rs.run.workflow_version,
    deadline_at: c.deadline_at ?? f.now,
    lease_expires_at: c.lease_expires_at,
    usage_runs: usageRuns(rs.run),
    compensates: {
      execution_id: v?.execution_id ?? undoneExecutionId(c.execution_id) ?? c.execution_id,
      output: v?.output ?? null,
      error: (v?.error ?? null) as Json | null,
    },
  };
}

async function task(f: FlushContext, rs: RunState, v: Visit): Promise<ClaimedTask> {
  const node = rs.graph.nodes.get(v.node_id);
  const deps: ClaimedTask["deps"] = {};
  for (const d of node?.depends_on ?? []) {
    const dv = rs.current.get(d);
    if (dv) deps[d] = { status: dv.state, output: dv.output, error: dv.error as Json | null };
  }
  let trigger: ClaimedTask["trigger"] = null;
  if (v.trigger) {
    const { node_id, visit } = v.trigger;
    // The trigger may be the current visit, one this flush superseded (a loop-back's source:
    // changed in memory, not written yet), or an older row.
    const same = (x: Visit) => x.node_id === node_id && x.visit === visit;
    const current = rs.current.get(node_id);
    const t =
      (current && same(current) ? current : undefined) ??
      [...rs.changes.updated].find(same) ??
      (await f.tx.getVisit({ run_id: rs.run.run_id, node_id, visit }));
    if (t) trigger = { node_id, visit, status: t.state, output: t.output, error: t.error as Json | null };
  }
  return {
    run_id: rs.run.run_id,
    node_id: v.node_id,
    agent_type: v.agent_type,
    visit: v.visit,
    attempt: v.attempt,
    execution_id: v.execution_id,
    payload: v.payload ?? {},
    input: rs.run.input,
    deps,
    trigger,
    trace_id: rs.run.trace_id,
    run_traceparent: rs.run.traceparent,
    workflow_id: rs.run.workflow_id,
    workflow_version: rs.run.workflow_version,
    deadline_at: v.deadline_at ?? f.now,
    lease_expires_at: v.lease_expires_at,
    usage_runs: usageRuns(rs.run),
  };
}
