/** Times, durations and JSON as the page shows them. */
import type { Run } from "./types.js";

/** `850 ms`, `3.2 s`, `4 min 3 s`, `2 h 5 min`, `3 d 4 h`. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}

/** How long something ran: to its end, or until now while it runs. */
export function elapsed(start: number | null, end: number | null, now: number): string {
  if (start === null) return "-";
  return duration((end ?? now) - start);
}

/** An instant as the page shows it (see `when`). */
export interface When {
  /** Local time to the millisecond, `12:03:04.217`, with the date first when it is not today. */
  clock: string;
  /** From `now`: `just now`, `3 s ago`, `in 2 min`, `5 d ago`. */
  relative: string;
  /** The full local date and time, and the UTC instant: for a tooltip. */
  full: string;
  /** The UTC instant (ISO 8601): for `<time datetime>`. */
  iso: string;
}

/**
 * The long form of a time, made once: `toLocaleString` with options builds a formatter on every
 * call, about a millisecond each, and a run page with a thousand events redraws every second.
 */
const LONG = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" });

/** One instant seen from `now`: the page's one way of writing times (components.tsx `Time` shows it). */
export function when(ms: number, now: number): When {
  const d = new Date(ms);
  const pad = (n: number, width = 2) => String(n).padStart(width, "0");
  const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  const hms = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  const today = new Date(now).toDateString() === d.toDateString();
  const iso = d.toISOString();
  return {
    clock: today ? hms : `${day} ${hms}`,
    relative: relative(ms - now),
    full: `${LONG.format(d)} (${iso})`,
    iso,
  };
}

/** A time as plain text (for a sentence, not a table): `when`'s clock, `-` for none. */
export function time(ms: number | null): string {
  return ms === null ? "-" : when(ms, Date.now()).clock;
}

/** `3 s ago` for -3000, `in 2 min` for 120000; under a second is `just now`. */
function relative(deltaMs: number): string {
  const s = Math.abs(deltaMs) / 1000;
  if (s < 1) return "just now";
  const amount =
    s < 60
      ? `${Math.floor(s)} s`
      : s < 3600
        ? `${Math.floor(s / 60)} min`
        : s < 86_400
          ? `${Math.floor(s / 3600)} h`
          : `${Math.floor(s / 86_400)} d`;
  return deltaMs < 0 ? `${amount} ago` : `in ${amount}`;
}

/**
 * Whether a node's reason is a failure (`danger`, red) or a normal way for a node to end (`muted`,
 * grey): a branch not taken, a dependency that cannot be met, or the run ending around the node
 * (`run_failed`, `run_end`, `run_ttl` on a skipped node: scheduler.ts), or a cancel (a run or a node
 * CANCELLED, whatever its reason).
 * Everything else with an error or on a FAILED node (timeout, rejected, retries_exhausted…) is a failure.
 */
export function reasonTone(v: { state: string; reason: string | null; error?: unknown }): "muted" | "danger" {
  if (v.reason === null) return v.error ? "danger" : "muted";
  if (NORMAL_REASONS.has(v.reason) || v.state === "SKIPPED") return "muted";
  if (v.state === "CANCELLED") return "muted"; // someone's decision, or the run ending around it: not a failure
  return v.state === "SUCCEEDED" && !v.error ? "muted" : "danger";
}

/** Reasons of src/core that say how a node ended without anything going wrong (readiness.ts, scheduler.ts). */
const NORMAL_REASONS: ReadonlySet<string> = new Set(["branch_not_taken", "dependency_unmet", "upstream_skipped"]);

/** Indented JSON (`undefined` shown as nothing). */
export function json(value: unknown): string {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

/**
 * When a sleeping node wakes: a `sleep` visit WAITING keeps its due time in `deadline_at`, which
 * for every other node (an attempt's timeout, a review's, an event wait's) is a real deadline.
 * Null when the visit is not a sleep waiting.
 */
export function wakesAt(v: { agent_type: string; state: string; deadline_at: number | null }): number | null {
  return v.agent_type === "sleep" && v.state === "WAITING" ? v.deadline_at : null;
}

/** A time short enough for a graph node: `14:03:07` today, `2025-06-01 14:03` another day (local). */
export function shortTime(ms: number, now: number): string {
  const clock = when(ms, now).clock;
  // `when` writes the date only when it is not today, and always the milliseconds.
  return clock.includes(" ") ? clock.slice(0, clock.lastIndexOf(":")) : clock.slice(0, clock.indexOf("."));
}

/** A value as one line of text: strings as they are, anything else as compact JSON. */
export function text(value: unknown): string {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The last characters of a run id: enough to tell runs apart in a list. */
export function shortId(id: string): string {
  return id.length > 13 ? `…${id.slice(-12)}` : id;
}

/**
 * A run's usage (its own and its child runs') and budget in one line (DESIGN §12); empty for a run
 * that reported nothing and has no budget.
 */
export function usageText(run: Pick<Run, "usage" | "budget">): string {
  const u = run.usage;
  const b = run.budget ?? null;
  const reported = u !== undefined && (u.tokens_in > 0 || u.tokens_out > 0 || u.cost > 0);
  if (!reported && !b) return "";
  const used = u
    ? `${u.tokens_in + u.tokens_out} tokens (in ${u.tokens_in}, out ${u.tokens_out}), cost ${figure(u.cost)}`
    : "nothing reported";
  if (!b) return used;
  const limits = [
    ...(b.max_tokens === undefined ? [] : [`max_tokens ${b.max_tokens}`]),
    ...(b.max_cost === undefined ? [] : [`max_cost ${b.max_cost}`]),
  ];
  return `${used}; budget ${limits.join(", ")}`;
}

/** A summed figure as people write it: float sums (0.1 + 0.2) rounded to 10 significant digits. */
function figure(n: number): string {
  return String(Number(n.toPrecision(10)));
}
