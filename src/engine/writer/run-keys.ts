/**
 * One active run per key, and debounce (DESIGN §17), in the flush's transaction. A run started
 * with a key is RUNNING when no run of its workflow and key is, and otherwise does what its
 * start's `on_active` says: waits QUEUED (no visits until it begins), is refused, replaces the
 * active run, or is not made at all. A debounced start waits QUEUED until its window passes;
 * a start of the same key within it replaces its input and moves the window.
 *
 * A key's runs are read under the limits lock on PostgreSQL (`keyedRuns`), so two engines never
 * both begin a run of one key; what this flush changed in memory is read over the database's
 * rows. A run that ends in a flush lets the next queued run of its key begin in the same
 * transaction (`release`), so a crash can neither lose nor double that hand-over.
 */
import { endRun } from "../../core/run-end.js";
import { event, runState } from "../../core/run-state.js";
import { beginRun, type RunState, startRunState } from "../../core/scheduler.js";
import type { Run, RunQueued, StartFlow } from "../../core/types.js";
import { ConflictError } from "../../errors.js";
import type { KeyedRun } from "../../store/runs.js";
import type { FlushContext } from "./context.js";
import type { Callback } from "./inputs.js";

/** The most not-ended runs of one key a flush reads (a queue longer than this is read in part). */
const KEY_READ_LIMIT = 10_000;

/** A key's runs that have not ended, as this flush sees them. */
interface KeyView {
  /** The run of the key that is RUNNING (paused or not), if any. */
  active: KeyedRun | undefined;
  /** The debounced run whose window has not passed, if any. */
  debounced: KeyedRun | undefined;
  /** The runs waiting behind the active one, in their order. */
  queue: KeyedRun[];
  /** The position a run queued now takes. */
  next: number;
}

export class RunKeys {
  /** Keys whose end this flush has handed over already, by run id of the run that ended. */
  private readonly handedOver = new Set<string>();
  /** Whether the database held a QUEUED run when this flush first looked (null: not looked yet). */
  private queuedInDb: boolean | null = null;

  constructor(private readonly f: FlushContext) {}

  /** Starts `run` (a new run with a key) as its flow says, and answers `done` once committed. */
  async start(run: Run, flow: StartFlow, done: Callback<Run>): Promise<void> {
    const f = this.f;
    const key = run.key as string;
    const view = await this.view(run.workflow_id, key);
    if (flow.debounce_ms !== null) {
      const until = f.now + flow.debounce_ms;
      // flowOf refuses reject and skip with a debounce.
      const onActive = flow.on_active === "cancel_active" ? "cancel_active" : "queue";
      if (view.debounced) {
        const rs = await this.loadWaiting(view.debounced.run_id);
        if (rs && rs.run.queued?.reason === "debounce") {
          rs.run.input = run.input;
          rs.run.input_hash = run.input_hash;
          rs.run.queued = { ...rs.run.queued, until, on_active: onActive };
          rs.run.deadline_at = until;
          rs.changes.runUpdated = true;
          event(rs, "run.queued", null, f.now, { reason: "debounce", until, replaced_input: true });
          return this.answer(rs.run, done);
        }
      }
      return this.queue(
        run,
        { reason: "debounce", since: f.now, position: view.next, until, on_active: onActive },
        done,
      );
    }
    if (!view.active && view.queue.length === 0) return this.begin(run, done);
    const active = view.active;
    switch (flow.on_active) {
      case "queue":
        return this.queue(run, { reason: "key", since: f.now, position: view.next, on_active: "queue" }, done, active);
      case "reject": {
        const what = active ? `run ${active.run_id} is active` : `${view.queue.length} runs are queued`;
        f.out.callbacks.push(() =>
          done.reject(
            new ConflictError(
              `${what} for key "${key}" of workflow ${run.workflow_id}; wait for it to end, cancel it, or start with on_active "queue" or "cancel_active"`,
            ),
          ),
        );
        return;
      }
      case "skip": {
        const rs = active ? await this.loadWaiting(active.run_id) : undefined;
        if (rs) return this.answer(rs.run, done);
        return this.queue(run, { reason: "key", since: f.now, position: view.next, on_active: "queue" }, done);
      }
      case "cancel_active":
        if (active) await this.replace(active.run_id, run.run_id, key);
        return this.begin(run, done);
    }
  }

  /**
   * Why an ended run of a key may not run again now (a retry), or null: another run of its key
   * is active or waits queued, and two active runs of one key are what keys exist to prevent.
   */
  async retryConflict(run: Run): Promise<ConflictError | null> {
    const key = run.key;
    if (key === null) return null;
    const view = await this.view(run.workflow_id, key);
    const other = view.active ?? view.queue[0];
    if (!other) return null;
    const what = view.active ? "is active" : "waits queued";
    return new ConflictError(
      `run ${other.run_id} of key "${key}" of workflow ${run.workflow_id} ${what}, and a key has one active run at a time; retry run ${run.run_id} when its key's runs have ended, or cancel them`,
    );
  }

  /**
   * Keys whose active run ended in this flush: the first run queued behind it begins. True when
   * one did (its first visits are ready for the claims that follow).
   */
  async release(): Promise<boolean> {
    const ended: Run[] = [];
    for (const rs of this.f.states.values()) {
      const run = rs.run;
      if (run.key === null || run.ended_at === null || run.queued !== null) continue;
      if (this.handedOver.has(run.run_id)) continue;
      this.handedOver.add(run.run_id);
      ended.push(run);
    }
    if (ended.length === 0 || !(await this.anyQueued())) return false;
    let began = false;
    for (const run of ended) if (await this.beginNext(run.workflow_id, run.key as string)) began = true;
    return began;
  }

  /**
   * Whether any run waits QUEUED: in this flush, or in the database (read once per flush, under
   * the limits lock on PostgreSQL, so no other engine queues one until this flush commits). Most
   * ends of keyed runs have none to hand over: one look instead of a read of each key's runs.
   */
  private async anyQueued(): Promise<boolean> {
    for (const rs of this.f.states.values()) if (rs.run.status === "QUEUED") return true;
    this.queuedInDb ??= await this.f.tx.anyQueued();
    return this.queuedInDb;
  }

  /**
   * A QUEUED run whose deadline passed (the sweep): a debounced run's window ended, so it begins
   * (or waits behind the active run of its key, or replaces it); a run queued behind another
   * that waited past its timeout fails as any run past its TTL does.
   */
  async due(rs: RunState): Promise<void> {
    const f = this.f;
    const run = rs.run;
    const queued = run.queued as RunQueued;
    if (queued.reason === "key") {
      endRun(
        rs,
        "ttl",
        {
          message: `the run waited QUEUED behind the active run of key "${run.key}" past its timeout (the workflow's TTL)`,
          reason: "run_timeout",
        },
        f.now,
      );
      return;
    }
    const view = await this.view(run.workflow_id, run.key as string);
    const active = view.active;
    if (active && queued.on_active === "cancel_active")
      await this.replace(active.run_id, run.run_id, run.key as string);
    else if (active || view.queue.length > 0) {
      // Its window passed: it arrives now, behind what is queued already.
      run.queued = { reason: "key", since: queued.since, position: view.next, on_active: "queue" };
      run.deadline_at = f.now + rs.graph.timeout * 1000;
      run.updated_at = f.now;
      rs.changes.runUpdated = true;
      event(rs, "run.queued", null, f.now, { reason: "key", ...(active ? { behind: active.run_id } : {}) });
      return;
    }
    beginRun(rs, f.now);
  }

  /** Begins the first run queued for the key when none of its runs is active; true when one began. */
  private async beginNext(workflowId: string, key: string): Promise<boolean> {
    const view = await this.view(workflowId, key);
    const next = view.queue[0];
    if (view.active || !next) return false;
    const rs = await this.loadWaiting(next.run_id);
    if (rs?.run.status !== "QUEUED") return false;
    beginRun(rs, this.f.now);
    return true;
  }

  /** A new run that begins now. */
  private async begin(run: Run, done: Callback<Run>): Promise<void> {
    const f = this.f;
    const { graph } = await f.o.registry.get(run.workflow_id, run.workflow_version);
    const rs = startRunState(run, graph, f.now);
    f.addRun(rs, 0);
    this.answer(rs.run, done);
  }

  /** A new run that waits QUEUED: no visits until it begins; its deadline is its window's end or its TTL. */
  private async queue(run: Run, queued: RunQueued, done: Callback<Run>, behind?: KeyedRun): Promise<void> {
    const f = this.f;
    const { graph } = await f.o.registry.get(run.workflow_id, run.workflow_version);
    const deadline = queued.until ?? f.now + graph.timeout * 1000;
    const rs = runState(
      { ...run, status: "QUEUED", queued, created_at: f.now, updated_at: f.now, deadline_at: deadline },
      graph,
      [],
    );
    event(rs, "run.queued", null, f.now, {
      reason: queued.reason,
      ...(queued.until === undefined ? {} : { until: queued.until }),
      ...(behind ? { behind: behind.run_id } : {}),
    });
    f.addRun(rs, 0);
    this.answer(rs.run, done);
  }

  /** Cancels the active run of a key for the run that replaces it (`cancel_active`). */
  private async replace(activeId: string, by: string, key: string): Promise<void> {
    const rs = await this.loadWaiting(activeId);
    if (!rs || rs.run.ended_at !== null) return;
    // Its end hands nothing over: the run that replaces it is the key's active run.
    this.handedOver.add(activeId);
    endRun(
      rs,
      "cancelled",
      { message: `replaced by run ${by}, started for key "${key}"`, reason: "replaced" },
      this.f.now,
    );
  }

  private answer(run: Run, done: Callback<Run>): void {
    const answer = { ...run };
    this.f.out.callbacks.push(() => done.resolve(answer));
  }

  /** The key's runs that have not ended: the database's rows, read over by this flush's runs. */
  private async view(workflowId: string, key: string): Promise<KeyView> {
    const f = this.f;
    const runs = new Map<string, KeyedRun & { ended?: boolean }>();
    for (const r of await f.tx.keyedRuns(workflowId, key, KEY_READ_LIMIT)) runs.set(r.run_id, r);
    for (const rs of f.states.values()) {
      const r = rs.run;
      if (r.key !== key || r.workflow_id !== workflowId) continue;
      if (r.ended_at !== null) runs.delete(r.run_id);
      else runs.set(r.run_id, r);
    }
    const live = [...runs.values()];
    const queue = live
      .filter((r) => r.queued?.reason === "key")
      .sort((a, b) => (a.queued as RunQueued).position - (b.queued as RunQueued).position);
    const positions = live.map((r) => r.queued?.position ?? 0);
    return {
      active: live.find((r) => r.status === "RUNNING" && r.queued === null),
      debounced: live.find((r) => r.queued?.reason === "debounce"),
      queue,
      next: Math.max(0, ...positions) + 1,
    };
  }

  /**
   * A run of the key, waiting for its lock when another transaction holds it (a flush's own
   * loads skip such runs; this one must not: the key's runs are read under the limits lock, and
   * a deadlock, should one follow, is undone and tried again).
   */
  private async loadWaiting(runId: string): Promise<RunState | undefined> {
    const f = this.f;
    const known = f.states.get(runId);
    if (known) return known;
    const read = await f.tx.loadRun(runId);
    return read ? f.take(read) : undefined;
  }
}
