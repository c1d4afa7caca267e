/**
 * Why ready work waits (DESIGN §17, "visible"): getRun's `waiting` on a node ready to run, and
 * the metrics' `skein_waiting{reason}` across the database. A run held back says so itself
 * (`Run.queued`: behind an active run of its key, or debounced); a ready visit waits, in this
 * order of what to fix first, for
 * - `no_agent`: nothing serves its agent type (it would wait until its run's timeout);
 * - `rate_limited`: its type's request or token window is spent, or a provider's 429 holds it,
 *   until a time;
 * - `priority`: ready work of its type with a more urgent priority is claimed first.
 * A visit that waits only for a free agent says nothing: it is next in line by age.
 */
import type { Clock } from "../clock.js";
import type { Visit } from "../core/types.js";
import type { Store, StoreGauges } from "../store/store.js";
import { type RateLimitState, rateLimitStates } from "./rate-states.js";
import { needsAgent, noAgent, type ServedTypes } from "./served-types.js";
import type { TypeRate } from "./writer/rates.js";

/** What a node ready to run waits for, when getRun has something to say about it (`NodeVisit.waiting`). */
export type NodeWaiting =
  | {
      /** No engine's handler and no recent worker serves its agent type. */
      reason: "no_agent";
      message: string;
    }
  | {
      /** Its agent type may start no attempt before `until` (its rate limits, or a provider's hold). */
      reason: "rate_limited";
      until: number;
      message: string;
    }
  | {
      /** `ahead` ready visits and map items of its agent type, of a more urgent priority, are claimed first. */
      reason: "priority";
      ahead: number;
      message: string;
    };

/** What `skein_waiting` counts: runs QUEUED by why, and ready visits and map items by what holds them. */
export const WAITING_REASONS = ["key", "debounce", "no_agent", "rate_limited", "priority"] as const;
export type WaitingReason = (typeof WAITING_REASONS)[number];

/** What judging why work waits reads. */
export interface WaitingParts {
  store: Store;
  served: Pick<ServedTypes, "all">;
  clock: Clock;
  /** The engine's `rateLimits` option (held types are read from the database whatever it says). */
  rateLimits: ReadonlyMap<string, TypeRate>;
}

/** What each of these visits waits for, by node_id, when it is ready to run and something holds it. */
export async function waitingOf(p: WaitingParts, visits: readonly Visit[]): Promise<Map<string, NodeWaiting>> {
  const found = new Map<string, NodeWaiting>();
  const candidates = visits.filter(waitsForAgent);
  if (candidates.length === 0) return found;
  const now = p.clock.now();
  const served = await p.served.all();
  let limits: Map<string, RateLimitState> | null = null;
  // Visits of one type and priority have the same work ahead: counted once.
  const aheadOf = new Map<string, Promise<number>>();
  for (const v of candidates) {
    if (!served.has(v.agent_type)) {
      found.set(v.node_id, { reason: "no_agent", message: noAgent(v.agent_type, served) });
      continue;
    }
    if (v.ready_at === null || v.ready_at > now || v.payload === null) continue; // a retry's backoff, or not resolved yet
    limits ??= new Map((await rateLimitStates(p.store, p.rateLimits, now)).map((s) => [s.agent_type, s]));
    const limited = limits.get(v.agent_type);
    if (limited?.limited_until != null && limited.limited_until > now) {
      found.set(v.node_id, rateLimited(limited, limited.limited_until));
      continue;
    }
    const key = `${v.priority}:${v.agent_type}`;
    if (v.priority > 0 && !aheadOf.has(key)) aheadOf.set(key, p.store.readyAhead(v.agent_type, v.priority, now));
    const ahead = (await aheadOf.get(key)) ?? 0;
    if (ahead > 0) {
      const what = `${ahead} ready visit${ahead === 1 ? "" : "s"} of agent type "${v.agent_type}"`;
      found.set(v.node_id, {
        reason: "priority",
        ahead,
        message: `behind ${what} of a more urgent priority (this run's is ${v.priority}; 0 is claimed first)`,
      });
    }
  }
  return found;
}

function rateLimited(s: RateLimitState, until: number): NodeWaiting {
  const at = new Date(until).toISOString();
  const why =
    s.held_until !== null && s.held_until >= until
      ? `held by a provider's 429 (Retry-After) until ${at}`
      : s.tokens_left !== null && s.expected_tokens !== null && s.tokens_left < s.expected_tokens
        ? `rate-limited until ${at}: ${Math.max(0, Math.floor(s.tokens_left))} of its ${s.tokens_per_minute} tokens per minute left, and its next attempt expects ${s.expected_tokens}`
        : `rate-limited until ${at}: its requests per second or minute are spent`;
  return { reason: "rate_limited", until, message: `agent type "${s.agent_type}" is ${why}` };
}

/**
 * The gauges' count of waiting work by reason (`skein_waiting`): QUEUED runs by theirs; ready
 * work of a type nothing serves as `no_agent`, of a limited type as `rate_limited`, and of any
 * other type, what waits behind the type's most urgent ready priority as `priority`.
 */
export function waitingCounts(
  g: Pick<StoreGauges, "ready" | "queued">,
  served: ReadonlySet<string>,
  limits: readonly RateLimitState[],
  now: number,
): Map<WaitingReason, number> {
  const counts = new Map<WaitingReason, number>(WAITING_REASONS.map((r) => [r, 0]));
  const add = (reason: WaitingReason, n: number) => counts.set(reason, (counts.get(reason) ?? 0) + n);
  for (const q of g.queued) if (q.reason === "key" || q.reason === "debounce") add(q.reason, q.runs);
  const limited = new Set(
    limits.filter((s) => s.limited_until !== null && s.limited_until > now).map((s) => s.agent_type),
  );
  const urgent = new Map<string, number>();
  for (const r of g.ready) urgent.set(r.agent_type, Math.min(urgent.get(r.agent_type) ?? 9, r.priority));
  for (const r of g.ready) {
    if (!needsAgent(r.agent_type)) continue;
    if (!served.has(r.agent_type)) add("no_agent", r.visits);
    else if (limited.has(r.agent_type)) add("rate_limited", r.visits);
    else if (r.priority > (urgent.get(r.agent_type) ?? r.priority)) add("priority", r.visits);
  }
  return counts;
}

/** A visit that waits for an agent to claim it: ready (or retrying) and of a kind agents run. */
function waitsForAgent(v: Visit): boolean {
  return (v.state === "PENDING" || v.state === "RETRYING") && v.ready_at !== null && needsAgent(v.agent_type);
}
