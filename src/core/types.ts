/**
 * Domain types of runs, visits and events, as the core and the engine see them. Data is
 * snake_case (DESIGN §1), the same as in the database and the HTTP API; stores convert their
 * rows to these types at their edge.
 */
import type { Json } from "../json-text.js";
import type { EndCause, RunStatus, VisitState } from "./states.js";

export type { Json };

/** Why an attempt or a visit failed. `reason` is one of DESIGN §3's failure reasons or an attempt failure (`timeout`, `lease_expired`, `error`). */
export interface VisitError {
  message: string;
  reason: string;
  name?: string;
  details?: Json;
  /** Wait this long before the retry instead of the backoff delay (at most retry_max_interval): a `Retry-After`. */
  retry_after_ms?: number;
}

export interface TriggerRef {
  node_id: string;
  visit: number;
}

export interface Visit {
  run_id: string;
  node_id: string;
  visit: number;
  /** Stable across the attempts of this visit: agents use it as an idempotency key. */
  execution_id: string;
  agent_type: string;
  state: VisitState;
  is_current: boolean;
  /** Made by a loop-back edge, which activates it. */
  loop_activated: boolean;
  trigger: TriggerRef | null;
  /** The resolved payload; null until resolved (templates resolve once per visit). */
  payload: Json | null;
  output: Json | null;
  error: VisitError | null;
  /** Why the visit is FAILED, SKIPPED or CANCELLED. */
  reason: string | null;
  /** A FAILED visit whose next_on_failure edges fired. */
  handled: boolean;
  /** The edge decision of this visit: the targets it fired (null = not decided yet). */
  fired: string[] | null;
  failures: number;
  attempt: number;
  interruptions: number;
  /** How many earlier visits of this node started running (for max_visits). */
  prior_starts: number;
  /** A `map` visit's item counts (DESIGN §11.1); null for other kinds and before it begins. */
  items: MapCounts | null;
  /** The value of its node's `concurrency.key`, resolved with the payload; null without one. */
  concurrency_key: string | null;
  /** Its run's `priority`, copied when the visit is made: claims order ready visits by it, then by `ready_at`. */
  priority: number;
  ready_at: number | null;
  deadline_at: number | null;
  lease_expires_at: number | null;
  holder: string | null;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
}

/** A run; `O` is its output's type when the caller knows it (`getRun<O>`), else Json. */
/**
 * The prefix of the idempotency keys the engine makes (child runs, map items, schedule slots:
 * engine/writer/engine-keys.ts), which clients may not use (DESIGN §13.1).
 */
export const ENGINE_KEY_PREFIX = "skein:";

/**
 * The prefix of the keys of runs triggers start (DESIGN §17): the only engine keys two engines
 * may write at once, when one event is published on both.
 */
export const TRIGGER_KEY_PREFIX = `${ENGINE_KEY_PREFIX}trigger:`;

export interface Run<O = Json> {
  run_id: string;
  workflow_id: string;
  workflow_version: number;
  status: RunStatus;
  input: Json;
  /** The output of the run's last node(s); null until it succeeds. */
  output: O | null;
  error: VisitError | null;
  end_cause: EndCause | null;
  trace_id: string;
  traceparent: string;
  idempotency_key: string | null;
  input_hash: string;
  needs_attention: boolean;
  created_at: number;
  updated_at: number;
  deadline_at: number;
  /** When the run stopped running nodes; moved to when it reached its final status if it compensated. */
  ended_at: number | null;
  /** The parent attempt this run is (a `workflow` node's child run, DESIGN §11.1); null for a top-level run. */
  parent: RunParent | null;
  /** The schedule whose slot started this run (DESIGN §11.5); null for a run started otherwise. */
  schedule_id: string | null;
  /** What its attempts reported (`task.reportUsage`, a worker's `usage`), its own and its descendants' (DESIGN §12). */
  usage: RunUsage;
  /** Its own budget (startRun's, else the workflow's); null: none. Its ancestors' budgets apply too. */
  budget: Budget | null;
  /**
   * The workflows its `workflow` nodes and map items may start (DESIGN §13.1): the patterns of the
   * scoped token that started its root, inherited by its child runs; null: every workflow.
   */
  scope: string[] | null;
  /**
   * On a run with a budget: what the attempts in flight under it (its own and its descendants')
   * are expected to use, by `<execution_id>@<attempt>` (DESIGN §13.1, budgets reserve); null: none.
   */
  reserved: Reservations | null;
  /**
   * Its tags (DESIGN §16): at most 16 string pairs given to startRun, inherited by its child runs
   * and map items; listRuns filters by them. {} when none.
   */
  tags: RunTags;
  /**
   * Set while the run is paused (DESIGN §16): no attempt of it starts; null when it is not.
   * `pauseRun` sets it, and a node with `on_exhausted: "pause"` whose retries ran out.
   */
  paused: RunPause | null;
  /**
   * The run and node it was forked from (DESIGN §16, `forkRun`): it kept that run's visits before
   * the node and ran the node and everything after it again; null for a run started otherwise.
   */
  forked_from: RunFork | null;
  /**
   * Its priority (DESIGN §17), 0 to 9, lower first: ready work of an agent type is claimed by
   * priority, then by age. startRun's (default 5), inherited by its child runs and map items.
   */
  priority: number;
  /**
   * Its key (DESIGN §17, `startRun({ key })`): at most one run of a workflow and key is active
   * (RUNNING) at a time; the others wait QUEUED. null for a run started without one.
   */
  key: string | null;
  /** Why a QUEUED run waits and what it does when it may begin; null once it began (or never queued). */
  queued: RunQueued | null;
  /**
   * The published event whose trigger started it (DESIGN §17, a workflow's `triggers`); null for
   * a run started otherwise.
   */
  triggered_by: RunTrigger | null;
}

/**
 * The event that started a run through a trigger of its workflow: its name and key, its id, and
 * the publisher's idempotency key (else the event's id), under which the trigger starts one run.
 */
export interface RunTrigger {
  event: string;
  key: string;
  event_id: string;
  idempotency_key: string;
}

/** What a run started with a key does when another run of its key is active (DESIGN §17). */
export type OnActive = "queue" | "reject" | "cancel_active" | "skip";

/** How a start with a key treats an active run of its key, and its debounce window (DESIGN §17). */
export interface StartFlow {
  on_active: OnActive;
  /** null: no debounce. */
  debounce_ms: number | null;
}

/**
 * A QUEUED run: `key`, behind the active run of its key (in `position` order); `debounce`, until
 * its window passes (`until`; a start of the same key within it replaces its input and moves it).
 */
export interface RunQueued {
  reason: "key" | "debounce";
  /** When it was queued (a debounced run: its first start). */
  since: number;
  /** Its place in its key's queue: the runs of a key begin in this order. */
  position: number;
  /** A debounced run: when its window passes and it begins (or queues behind the active run). */
  until?: number;
  /** What it does, once its window passed, when a run of its key is active: wait for it, or cancel it. */
  on_active: "queue" | "cancel_active";
}

/** A run's priority when startRun gives none: the middle of 0 (claimed first) to 9 (claimed last). */
export const DEFAULT_PRIORITY = 5;

/**
 * Why and by whom a run is paused. `node_id` and `visit`: the visit whose retries ran out
 * (`on_exhausted: "pause"`), waiting for an operator to resume it (one more attempt) or fail it.
 */
export interface RunPause {
  /** Who paused it: the caller's name, or `engine` for a node whose retries ran out. */
  by: string | null;
  at: number;
  reason: string | null;
  node_id?: string;
  visit?: number;
}

/** Where a forked run came from: the source run and the node it ran again from. */
export interface RunFork {
  run_id: string;
  node_id: string;
}

/** A run's tags: names to values, both strings. */
export type RunTags = Record<string, string>;

/** An attempt's expected usage, reserved against a budget; `probe`: nothing was known of it (it runs alone). */
export interface Reservation {
  tokens: number;
  cost: number;
  probe?: true;
}

export type Reservations = Record<string, Reservation>;

/** Usage an attempt reports (DESIGN §12): non-negative finite numbers; a run sums them. */
export interface Usage {
  tokens_in?: number;
  tokens_out?: number;
  cost?: number;
}

/** A run's usage: zeros when nothing was reported. */
export interface RunUsage {
  tokens_in: number;
  tokens_out: number;
  cost: number;
}

/** A run's budget (DESIGN §12): no attempt starts once its usage reaches either figure. `max_tokens` counts tokens_in + tokens_out. */
export interface Budget {
  max_tokens?: number;
  max_cost?: number;
}

/** The attempt of a parent run's `workflow` node that a child run is; `depth` 1 is a top-level run's child. */
export interface RunParent {
  run_id: string;
  node_id: string;
  visit: number;
  attempt: number;
  depth: number;
  /** The item of a `map` visit this run is (its index in the list); absent for a `workflow` node's child. */
  item?: number;
  /**
   * The tool call of an `agent` visit this run is (`<turn>:<index>`): any attempt of the visit
   * waits for it (`attempt` is the one that started it), and it lives while the visit does.
   */
  call?: string;
  /**
   * Every run above this one, its parent first: usage reported in this run is added to each
   * (DESIGN §12). Absent in child runs started before schema v11: the parent only.
   */
  ancestors?: string[];
  /** The ancestors that have a budget: checked (read) before each attempt of this run starts. Absent: none. */
  budgeted?: string[];
}

/**
 * A `map` visit's items by state, kept on the visit as items start and end. PENDING items are
 * `total - running - succeeded - failed - cancelled`. Items start in index order: `next` is where
 * the search for the next PENDING item begins (items a redrive carried over are SUCCEEDED
 * already, anywhere in the list).
 */
export interface MapCounts {
  total: number;
  running: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  next: number;
  /**
   * How many of the list's items are rows yet: a long list is written a chunk per flush
   * (engine/writer/bounded-work.ts). Absent (visits before schema v15): all of them.
   */
  written?: number;
  /**
   * Set when the map SUCCEEDED within its tolerated failures: its FAILED and CANCELLED items, the
   * first `FAILED_ITEMS_SHOWN` by index (core/kinds/map.ts); `failed + cancelled` is how many there were.
   */
  failed_items?: FailedItem[];
}

/** An item of a map that did not succeed: its index, its run (null: it failed before one started) and why. */
export interface FailedItem {
  index: number;
  run_id: string | null;
  /** The item's error, its message and reason only (listMapItems has the whole). */
  error: Pick<VisitError, "message" | "reason"> | null;
}

/** RETRYING only for an item whose attempts are its row's own (`agent_type` set). */
export type MapItemState = "PENDING" | "RUNNING" | "RETRYING" | "SUCCEEDED" | "FAILED" | "CANCELLED";

/**
 * One item of a `map` visit (DESIGN §11.1): a row. An item of `each: { workflow_id }` is run by
 * a child run of the visit's attempt (`child_run_id`). An item of `each: { agent_type }` holds its
 * attempts in the row itself, with a visit's attempt fields (`agent_type` set): claimed, fenced,
 * retried, leased and interrupted as a visit's are (core/kinds/map.ts), without a run of its own.
 */
export interface MapItem {
  run_id: string;
  node_id: string;
  visit: number;
  /** Its position in the list: the output's slot. */
  index: number;
  item: Json;
  state: MapItemState;
  /** The child run that runs it (null while PENDING, and for an item that failed before its run started). */
  child_run_id: string | null;
  /** The child run's output once SUCCEEDED. */
  output: Json | null;
  /** The child run's error once FAILED or CANCELLED. */
  error: VisitError | null;
  started_at: number | null;
  ended_at: number | null;
  /** The agent that runs it when the row holds its attempts; null when a child run runs it. */
  agent_type: string | null;
  /** Only grows: fences results, as a visit's does. */
  attempt: number;
  /** Failed attempts: spend the map node's retry budget. */
  failures: number;
  /** Deaths of the engine holding an attempt: the third fails the item (a poison task). */
  interruptions: number;
  /** Its run's `priority`, copied when the row is written: claims order ready items by it, then by `ready_at`. */
  priority: number;
  /** Set while it may be claimed: PENDING once its map started it, RETRYING at its retry time. */
  ready_at: number | null;
  /** The running attempt's hard cap (the map node's timeout). */
  deadline_at: number | null;
  /** The deadline or the heartbeat expiry, the earlier. */
  lease_expires_at: number | null;
  /** The engine (or `worker:<id>`) holding the running attempt. */
  holder: string | null;
}

/**
 * One compensation (DESIGN §6): undoes the effect of one visit of a node that declares
 * `compensation`. A row of its own with the visit state machine (PENDING, RUNNING, RETRYING,
 * SUCCEEDED, FAILED, SKIPPED), retries and fencing; a run's rows run one at a time, by `seq`.
 */
export interface Compensation {
  run_id: string;
  /** Order within the run: 1 runs first; a redriven run that fails again continues the numbering. */
  seq: number;
  /** The visit it undoes. */
  node_id: string;
  visit: number;
  /** `<visit execution_id>:compensate`: stable across attempts, an idempotency key for the agent. */
  execution_id: string;
  agent_type: string;
  state: VisitState;
  output: Json | null;
  error: VisitError | null;
  /** Why it is FAILED or SKIPPED. */
  reason: string | null;
  failures: number;
  attempt: number;
  interruptions: number;
  ready_at: number | null;
  deadline_at: number | null;
  lease_expires_at: number | null;
  holder: string | null;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
}

export type EventType =
  | "run.started"
  | "run.succeeded"
  | "run.failed"
  | "run.cancelled"
  | "run.warning"
  | "node.ready"
  | "node.started"
  | "node.succeeded"
  | "node.failed"
  | "node.retrying"
  | "node.waiting"
  | "node.interrupted"
  | "node.skipped"
  | "node.cancelled"
  | "branch.none"
  | "result.fenced"
  | "loop.reset"
  | "child.started"
  | "child.ended"
  | "review.requested"
  | "review.decided"
  | "event.received"
  | "event.delivered"
  | "run.needs_attention"
  | "run.retried"
  | "run.paused"
  | "run.resumed"
  | "run.forked"
  | "run.queued"
  | "run.migrated"
  | "item.retrying"
  | "item.failed"
  | "item.interrupted"
  | "compensation.planned"
  | "compensation.started"
  | "compensation.succeeded"
  | "compensation.retrying"
  | "compensation.failed"
  | "compensation.skipped"
  | "notify.failed"
  | "node.progress";

export interface NewEvent {
  run_id: string;
  type: EventType;
  node_id: string | null;
  visit: number | null;
  trace_id: string;
  at: number;
  data: Record<string, Json>;
}

/** One line of a run's history (DESIGN §9). `seq` orders all events of a database. */
export interface RunEvent extends NewEvent {
  seq: number;
}

/**
 * Partial output of a running attempt (`task.progress`, DESIGN §11.6, §15), kept in the run's
 * history like any event: at most one per `progressIntervalMs` per attempt (text deltas sent
 * within it are joined, other values replace one another). An attempt that is retried leaves its
 * progress superseded: the next attempt's starts again.
 */
export interface ProgressEvent extends RunEvent {
  type: "node.progress";
  node_id: string;
  visit: number;
  data: { attempt: number; progress: Json };
}

/** What `Engine.subscribe` listeners receive: stored events, progress among them. */
export type LiveEvent = RunEvent;

/**
 * An event sent to a run (`run_id`) or published by key (`run_id` null, DESIGN §11.2–11.3), as
 * its inbox row stores it. `delivered_to` is the wait_event visit that took a run's event; an
 * event by key is never marked (every waiting run receives it).
 */
export interface InboxEvent {
  event_id: string;
  run_id: string | null;
  name: string;
  key: string | null;
  payload: Json;
  /** The sender's idempotency key, else the event_id. */
  idempotency_key: string;
  created_at: number;
  delivered_to: { node_id: string; visit: number } | null;
  delivered_at: number | null;
  /**
   * An event by key from a scoped publisher: the workflows whose runs may take it, from its
   * buffer too (DESIGN §13.1); null or absent: any run.
   */
  scope?: string[] | null;
}

/** What a schedule does when a slot comes while a run it started has not ended (DESIGN §11.5). */
export type Overlap = "skip" | "allow" | "cancel_previous";
/** Which slots a schedule fires after they passed unfired (the engines were down, DESIGN §11.5). */
export type Catchup = "none" | "latest" | "all";

/**
 * A schedule as `putSchedule` takes it: runs of a workflow started on a cron expression
 * (DESIGN §11.5). Defaults are filled in by putSchedule.
 */
export interface ScheduleInput {
  /** `[A-Za-z0-9_.:-]{1,128}`. */
  schedule_id: string;
  /** A registered workflow. */
  workflow_id: string;
  /** A pinned version; default: the latest at each firing. */
  version?: number;
  /** 5 fields (minute first), or 6 with seconds first; croner's syntax (`@hourly`, `L`, `#` too). */
  cron: string;
  /** An IANA time zone name the cron is read in. @defaultValue "UTC" */
  timezone?: string;
  /** The runs' input, checked against the workflow's input_schema. @defaultValue {} */
  input?: Json;
  /** @defaultValue "skip" */
  overlap?: Overlap;
  /** @defaultValue "latest" */
  catchup?: Catchup;
  /** For catchup "all": at most this many missed slots, the most recent; 1..1000. @defaultValue 100 */
  catchup_limit?: number;
  /** @defaultValue false */
  paused?: boolean;
}

/** A stored schedule: its input with the defaults filled in, and where its firing stands. */
export interface Schedule extends Required<Omit<ScheduleInput, "version">> {
  /** The pinned version, or null: the latest at each firing. */
  version: number | null;
  /** Epoch ms of the next slot; null while paused (or when the cron has no slot left). */
  next_fire_at: number | null;
  /** The latest slot handled (fired, or skipped by `overlap`); null before the first. */
  last_slot_at: number | null;
  /** The latest run a slot started. */
  last_run_id: string | null;
  /** The scope of the token that put it (DESIGN §13.1), given to the runs its slots start; null: every workflow. */
  scope: string[] | null;
  created_at: number;
  updated_at: number;
}
