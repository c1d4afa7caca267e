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

/** A local date and time, to the second. */
export function time(ms: number | null): string {
  if (ms === null) return "-";
  return new Date(ms).toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
}

/** Indented JSON (`undefined` shown as nothing). */
export function json(value: unknown): string {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
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
    ? `${u.tokens_in + u.tokens_out} tokens (in ${u.tokens_in}, out ${u.tokens_out}), cost ${u.cost}`
    : "nothing reported";
  if (!b) return used;
  const limits = [
    ...(b.max_tokens === undefined ? [] : [`max_tokens ${b.max_tokens}`]),
    ...(b.max_cost === undefined ? [] : [`max_cost ${b.max_cost}`]),
  ];
  return `${used}; budget ${limits.join(", ")}`;
}
