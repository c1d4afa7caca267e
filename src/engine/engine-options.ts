/** The options and answers of the public Engine (engine.ts): what a caller passes and gets back. */

import type { MeterProvider } from "@opentelemetry/api";
import type { Logger } from "pino";
import type { AgentHandler, DecideHook } from "../agents/task.js";
import type { EgressOptions } from "../calls/egress.js";
import type { LlmOptions } from "../calls/llm/providers.js";
import type { McpOptions } from "../calls/mcp.js";
import type { Clock } from "../clock.js";
import type { Budget, Compensation, Json, LiveEvent, OnActive, Run, RunEvent, RunTags, Visit } from "../core/types.js";
import type { ChildRun } from "../store/store.js";
import type { SecretOption } from "./attempts/secrets.js";
import type { TaskLimits } from "./attempts/task-limits.js";
import type { MapProgress } from "./map-items.js";
import type { RetentionOptions } from "./retention.js";

export type { PruneOptions } from "./retention.js";

import type { NotifyOptions } from "./telemetry/notifier.js";
import type { NodeWaiting } from "./waiting.js";

/**
 * A rate limit of one agent type (DESIGN §17): of requests (`per_second` or `per_minute`, one of
 * them, and how many may gather), of tokens (`tokens_per_minute`), or both.
 */
export interface RateLimit {
  per_second?: number;
  per_minute?: number;
  /** The most claims at once after a quiet time (with `per_second` or `per_minute`). @defaultValue 1 */
  burst?: number;
  /**
   * Tokens of reported usage (`tokens_in + tokens_out`) per minute across the database: an
   * attempt starts when the window holds its expected tokens (its payload's `max_tokens`, or the
   * tokens the type's last attempt used, whichever is larger) and is charged what it used.
   */
  tokens_per_minute?: number;
}

export interface EngineOptions {
  /**
   * `sqlite:<path>`, `sqlite::memory:`, or `postgres://user@host:5432/db?schema=skein` (many
   * engines may share one PostgreSQL schema). @defaultValue `"sqlite:./skein.db"`
   */
  database?: string;
  /**
   * PostgreSQL behind a transaction-mode connection pooler (PgBouncer, a hosted database's
   * pooler; DESIGN §8): give the pooler as `database` and a direct connection to the same
   * database here, for what needs a session of its own (LISTEN/NOTIFY and the engine's liveness
   * lock: one connection per engine). Every other statement goes through the pooler, which then
   * gets no startup options, no session state and no named prepared statements. Without it,
   * `database` must be a direct connection (a pooler refuses Skein's startup options, which the
   * error says).
   * @example createEngine({ database: "postgres://app@pgbouncer:6432/app?schema=skein", listenDatabase: "postgres://app@db:5432/app" })
   * @defaultValue none: `database` is a direct connection
   */
  listenDatabase?: string;
  /** In-process agents by agent_type. The built-in `aggregator` is always there. */
  agents?: Record<string, AgentHandler>;
  /** Code hooks named by nodes' `decide`. */
  decideHooks?: Record<string, DecideHook>;
  /** SQLite durability: `normal` survives process crashes; `full` also power loss. @defaultValue `"normal"` */
  synchronous?: "normal" | "full";
  /** How long a write waits for a lock another process holds on the SQLite file, ms. @defaultValue 5000 */
  busyTimeoutMs?: number;
  /** Most attempts in flight in this engine; more ready nodes wait in the database. @defaultValue 100 */
  maxConcurrency?: number;
  /**
   * Most attempts RUNNING per agent_type across the whole database (an LLM provider's limit),
   * e.g. `{ llm: 4 }`: this engine's handlers, the external workers it serves (`/v1/tasks`) and
   * other engines' attempts all count. Each engine enforces its own option for the claims it
   * makes, so give every engine of a database the same limits (an engine without one claims
   * without looking). A visit over the limit waits ready in the database and is claimed, in
   * ready order, as attempts end. On PostgreSQL claims of limited types are serialised across
   * engines (an advisory lock until the claiming transaction commits); unlimited types pay nothing.
   */
  agentConcurrency?: Record<string, number>;
  /**
   * Most claims per second or per minute per agent_type across the whole database, e.g.
   * `{ llm: { per_minute: 600, burst: 20 } }`, and most tokens of reported usage per minute, e.g.
   * `{ llm: { tokens_per_minute: 90_000 } }` (either or both): buckets in the database per type,
   * shared by every engine (give them all the same limits) and the workers they serve. A visit
   * over the rate waits ready; the engine wakes when the bucket has room. `burst` @defaultValue 1
   *
   * Whatever the limits, a provider's 429 with `Retry-After` (an `llm` or `agent` node's call, or
   * an agent's `RetryableError` with `rateLimited`) holds its agent type on every engine for that long.
   */
  rateLimits?: Record<string, RateLimit>;
  /**
   * How often the engine looks for due work a lost wake-up left behind, ms; on PostgreSQL also
   * for dead engines (their liveness lock free), whose attempts it re-runs.
   * @defaultValue 1000 on SQLite; 500 on PostgreSQL, so that a killed engine's attempts run
   * again within a second
   */
  sweepIntervalMs?: number;
  /** How often the engine records that it is alive, ms. @defaultValue 5000 */
  heartbeatIntervalMs?: number;
  /**
   * After how long without a heartbeat an engine counts as dead, ms. On PostgreSQL an engine
   * that died (its process, or its connection) is found sooner, by its lock; this is for one
   * that hangs with its connection open. @defaultValue 30000
   */
  engineTimeoutMs?: number;
  /** Largest run input, agent output or resolved payload, in bytes of JSON. @defaultValue 1 MiB */
  maxPayloadBytes?: number;
  /**
   * The most runs one root run's tree may hold: the root, its child runs and map item runs, at any
   * depth (DESIGN §13.1). A `workflow` node or a map whose start would pass it fails its visit with
   * reason `tree_limit`. Counted in the database, so it holds across engines. @defaultValue 100000
   */
  maxRunsPerTree?: number;
  /**
   * Secrets by name (DESIGN §12): `{{ secrets.NAME }}` in the payloads of http and llm nodes, and
   * of nodes whose agent declares it (`defineAgent({ secrets: ["NAME"] }, handler)`). The value is
   * put in at dispatch only; payloads, events, logs, the API and the page show `"[secret NAME]"`,
   * and an attempt's output and error have every value replaced by it. `skein serve`, `engine`
   * and `worker` read `SKEIN_SECRET_<NAME>` environment variables into it (and
   * `SKEIN_SECRET_<NAME>_HOSTS`, `SKEIN_SECRET_<NAME>_WORKFLOWS`, comma-separated). A value is at
   * least 8 characters. `{ value, hosts, workflows }` limits where it may be sent (host names or
   * `"*.example.com"`) and which workflows may read it (ids or `"team-a-*"` patterns), checked at
   * registration where the URL is static and at dispatch, for every redirect hop (DESIGN §13.1).
   * @example createEngine({ secrets: { GITHUB_TOKEN: { value: process.env.GITHUB_TOKEN ?? "", hosts: ["api.github.com"] } } })
   * @defaultValue none
   */
  secrets?: Record<string, SecretOption>;
  /**
   * Where the `http` node may connect (DESIGN §13.1), checked on the addresses DNS gives and on
   * every redirect hop: `deny` host names (`"*.corp.example"`), CIDRs, `"private"`, `"loopback"`
   * or `"*"`; `allow` lifts a deny for what it matches. Link-local addresses (cloud metadata)
   * and the engine's own HTTP API are never called. `skein serve` with tokens denies private and
   * loopback unless allowed (`--egress-allow`).
   * @example createEngine({ egress: { deny: ["private", "loopback"], allow: ["10.1.2.3/32"] } })
   * @defaultValue nothing denied but link-local addresses and the engine's own API
   */
  egress?: EgressOptions;
  /** Time source; tests pass a ManualClock. @defaultValue the system clock */
  clock?: Clock;
  /** Random numbers for retry jitter. @defaultValue Math.random */
  random?: () => number;
  /** @defaultValue a pino logger to stderr at level `SKEIN_LOG_LEVEL` or `warn` */
  logger?: Logger;
  /** @defaultValue `<host>-<pid>-<random>` */
  engineId?: string;
  /**
   * Where the engine's metrics go (DESIGN §9: runs, attempts, durations, queue depths; metrics.ts
   * lists them): an OpenTelemetry MeterProvider, e.g. the SDK's with an OTLP exporter. Read once,
   * when the engine is created. `skein serve` passes its own, exported at `GET /metrics`.
   * @defaultValue the global one (`metrics.getMeterProvider()`: a no-op unless the host set one before)
   */
  meterProvider?: MeterProvider;
  /**
   * Notifiers called on `review.requested`, `run.failed` and `run.needs_attention`: each webhook
   * gets a JSON POST with a `traceparent` header, and `hook` the same notification. Delivery is
   * asynchronous and retried with backoff on the clock; one that fails for good is logged and
   * recorded as a `notify.failed` event. Retries pending at `close()` are abandoned.
   */
  notify?: NotifyOptions;
  /**
   * The HTTP API's address as people reach it (`skein serve --public-url`), e.g.
   * `https://skein.example.com`: `review.requested` notifications then carry `review_url`,
   * `<publicUrl>/v1/runs/<run_id>/nodes/<node_id>/review`.
   */
  publicUrl?: string;
  /**
   * What one client of the external-agent protocol may hold or send: long-poll claims per
   * token and in total, claims and heartbeats per second per token (DESIGN §13).
   * @defaultValue 100 waiting per token, 1000 in all, 500 a second per token with bursts of 1000
   */
  taskLimits?: TaskLimits;
  /**
   * How long finished runs are kept (DESIGN §8), per status: seconds, or text such as `"30d"`,
   * `"12h"`, `"45m"`, `"90s"`. The engine deletes older top-level runs with their visits,
   * events, compensations, inbox rows, map items and child runs, one batch per sweep; their
   * idempotency keys are forgotten (a start with the same key makes a new run). Time is the
   * database's on PostgreSQL.
   * @example retention: { succeeded: "30d", failed: "90d" }
   * @defaultValue every run is kept for ever
   */
  retention?: RetentionOptions;
  /**
   * Where `llm` nodes send their chat completions (DESIGN §12, docs/llm.md): OpenAI-compatible
   * providers by name; a node's `payload.provider` picks one, `default` when it names none.
   * @example llm: { providers: { default: { base_url: "https://api.openai.com/v1", api_key: process.env.OPENAI_API_KEY } } }
   * @defaultValue no providers: an llm node fails, naming this option
   */
  llm?: LlmOptions;
  /**
   * MCP servers whose tools `agent` nodes may call (DESIGN §14.2, docs/agent-node.md): by name,
   * over Streamable HTTP (`url`, `headers`) or stdio (`command`, `args`, `env`); a node's tools
   * name one with `{ "mcp": "<name>" }`. Connected on first use, closed with the engine.
   * @example mcp: { servers: { tickets: { url: "https://mcp.example.com/mcp", headers: { authorization: `Bearer ${token}` } } } }
   */
  mcp?: McpOptions;
  /**
   * @internal the test harness's: every in-process handler (the given agents and the built-in
   * kinds' own) passes through it once, by agent_type, as the engine is made.
   */
  wrapHandler?: (agentType: string, handler: AgentHandler) => AgentHandler;
  /**
   * How often one attempt's progress (`task.progress`, a worker's `POST /v1/tasks/{id}/progress`)
   * reaches subscribers, ms: the first call at once, then at most one per interval, the latest of
   * the calls within it (DESIGN §11.6). 0: every call. @defaultValue 50
   */
  progressIntervalMs?: number;
}

/** What `createClient` takes of the engine's options: the database and how to reach it. */
export type ClientOptions = Pick<
  EngineOptions,
  "database" | "listenDatabase" | "synchronous" | "busyTimeoutMs" | "maxPayloadBytes" | "clock" | "logger"
>;

export interface StartRunOptions {
  input?: unknown;
  /** The same key returns the same run; the same key with another input is a ConflictError. */
  idempotency_key?: string;
  /** W3C trace context of the caller; the run joins its trace. */
  traceparent?: string;
  /** A registered version; default the latest. */
  version?: number;
  /**
   * The run's budget (DESIGN §12), replacing the workflow's `budget`: once the usage its attempts
   * and child runs reported reaches `max_tokens` (tokens_in + tokens_out) or `max_cost`, no
   * further attempt starts and the visit fails `budget_exceeded`.
   * @example engine.startRun("research", { input, budget: { max_tokens: 100_000 } })
   * @defaultValue the workflow's `budget`, else none
   */
  budget?: Budget;
  /**
   * The workflows this run's `workflow` nodes and map items, and theirs, may start (DESIGN §13.1):
   * workflow ids or patterns with `*`. A child or item outside it fails its visit `out_of_scope`.
   * The HTTP API sets it to a scoped token's `workflows`.
   * @defaultValue every workflow
   */
  scope?: readonly string[];
  /**
   * Tags (DESIGN §16): at most 16 pairs of a name (1 to 64 of `A-Z a-z 0-9 _ . : -`) and a string
   * value (at most 256 characters), inherited by the run's child runs; `listRuns({ tags })`
   * finds the runs that carry all of the pairs given.
   * @example engine.startRun("support", { input, tags: { customer: "acme", channel: "email" } })
   */
  tags?: RunTags;
  /**
   * The run's key (DESIGN §17): at most one run of the workflow with this key is active at a
   * time, across every engine of the database; `on_active` says what a start does while one is.
   * 1 to 256 characters (a user, a conversation, a document id).
   * @example engine.startRun("chat", { input, key: `thread:${threadId}`, on_active: "cancel_active" })
   */
  key?: string;
  /**
   * What this start does while a run of its key is active: `queue` (begin when it and those
   * queued before it ended, in order), `reject` (a ConflictError naming the active run),
   * `cancel_active` (cancel it and begin now: the new message replaces the old run), or `skip`
   * (start nothing and answer the active run). Needs `key`.
   * @defaultValue "queue"
   */
  on_active?: OnActive;
  /**
   * Debounce (DESIGN §17): starts of this key within the window make one run, with the last
   * input, which begins once `debounce_seconds` passed without another start. Each start answers
   * that run (QUEUED until then). Needs `key`; with `on_active` only `queue` or `cancel_active`,
   * applied when the window passes.
   */
  debounce_seconds?: number;
  /**
   * Its priority (DESIGN §17): a whole number from 0 to 9, LOWER FIRST. Ready work of an agent
   * type is claimed by priority, then by age (oldest first), by this engine's agents, other
   * engines and external workers alike; it matters where work waits, under `agentConcurrency`,
   * `rateLimits` or `maxConcurrency`. Inherited by the run's child runs and map items; a fork
   * keeps its source's. Anything else is a ValidationError at `priority`.
   * @example engine.startRun("support", { input, priority: 1 }) // ahead of the default 5
   * @defaultValue 5
   */
  priority?: number;
  /**
   * Hears every event of the run from its first (`run.started`), exactly once, until the run
   * ends (its run.succeeded, run.failed or run.cancelled event is the last), or the engine
   * closes. A run an idempotency key returns is replayed from its first event too. Progress
   * (`node.progress`) is left out: `Engine.subscribe` listeners hear it.
   */
  onEvent?: (event: RunEvent) => void;
}

/** forkRun's options (DESIGN §16). */
export interface ForkRunOptions {
  /**
   * The node the fork runs again from: it and every node downstream of it run; what the source
   * did before it (visits that succeeded, were skipped by branching, or failed with their
   * failure edges taken) is kept without running again.
   */
  from: string;
  /**
   * The fork's input, checked against the input_schema as startRun checks it.
   * @defaultValue the source's input
   */
  input?: unknown;
  /**
   * Payloads by node id, each replacing the resolved payload of that node's first visit in the
   * fork (its templates are not resolved). Only nodes the fork runs: a kept node, or one the
   * workflow has not, is a ValidationError naming it.
   */
  payloads?: Record<string, unknown>;
  /**
   * The version the fork runs; every kept node must be in it with the same agent_type.
   * @defaultValue the source's version
   */
  version?: number;
  /**
   * The fork's scope (StartRunOptions.scope); the HTTP API sets it to a scoped token's `workflows`.
   * @defaultValue the source's
   */
  scope?: readonly string[];
}

/** putSchedule's options. */
export interface PutScheduleOptions {
  /**
   * The scope (StartRunOptions.scope) of the runs its slots start; the HTTP API sets it to a
   * scoped token's `workflows`. Putting the schedule again replaces it.
   * @defaultValue every workflow
   */
  scope?: readonly string[];
}

/** Which events `Engine.subscribe` hands to its listener. */
export interface SubscribeFilter {
  /** Only this run's events. */
  run_id?: string;
  /**
   * Needs `run_id`: first the run's stored events with seq >= from (0: its whole history), in
   * seq order, then live ones; no gap, no duplicate.
   */
  from?: number;
  /** Called when the replay cannot read the history (the subscription has then ended). Default: logged. */
  onError?: (err: unknown) => void;
}

/** A run with its current visits; `O` is the output's type the caller supplies (`getRun<O>`). */
export interface RunWithNodes<O = Json> extends Run<O> {
  nodes: NodeVisit[];
  /** Nodes waiting for a person's decision. */
  waiting_reviews: number;
  /** What a failed (or cancelled) run undid or undoes, in order (DESIGN §6). */
  compensations: Compensation[];
  /** The child runs of its `workflow` nodes, by node, visit and attempt (DESIGN §11.1). */
  children: ChildRun[];
}

/** A current visit as getRun shows it: a map node's counts include the items not started yet. */
export interface NodeVisit extends Visit {
  items: MapProgress | null;
  /**
   * What a node ready to run waits for, when that is worth saying (waiting.ts); absent otherwise:
   * `no_agent` (no engine has a handler for its agent type and no worker claimed it lately, so it
   * waits until the run's timeout; the message names the nearest served type when it looks like
   * a typo), `rate_limited` (its type may start nothing before `until`: its rate limits, or a
   * provider's 429), `priority` (`ahead` ready visits of its type with a more urgent priority go first).
   */
  waiting?: NodeWaiting;
}

/** A decision on a `human_review` node. */
export interface ReviewOptions {
  decision: "approve" | "reject";
  /** Who decides; must be among the node's `assignees` when it has some. */
  by?: string;
  /**
   * The admin who decides *as* `by` (DESIGN §13): recorded in the review.decided event as
   * `admin`. An admin deciding as itself (`by` equal to `admin`) must be an assignee itself.
   */
  admin?: string;
  comment?: string;
  /** Edited output to pass on (approve). */
  output?: unknown;
  /** The review round decided on; a decision for an older round of a loop is a ConflictError. */
  execution_id?: string;
}

/** What waits for a person. */
export interface PendingReview {
  run_id: string;
  workflow_id: string;
  node_id: string;
  visit: number;
  execution_id: string;
  title: Json | null;
  instructions: Json | null;
  assignees: Json | null;
  /** The review node's payload: the data to review (templates resolved). */
  data: Json | null;
  requested_at: number | null;
  deadline_at: number | null;
  trace_id: string;
}

/** An `Engine.subscribe` listener: the runs' events, each with its `seq`, progress (`node.progress`) among them. */
export type EventListener = (event: LiveEvent) => void;

/** Who acts on a run, and why (pauseRun, resumeRun, failVisit: DESIGN §16), recorded in its events and `paused`. */
export interface OperatorOptions {
  /** A name for the history (a person's, a script's). */
  by?: string;
  reason?: string;
}
