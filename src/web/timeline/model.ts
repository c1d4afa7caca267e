/**
 * A run's timeline as plain data: one row per visit, one bar per attempt, from the run's events
 * (replayed history, then live) and its current visits. Pure: no DOM, no clock (`now` is given),
 * so the view only draws what this computes, and a unit test covers every event it reads.
 *
 * What opens a bar: `node.started` (an agent's attempt; held by `run:<id>`, a child run; by
 * `map`, a map's items), `review.requested` (a person decides), `node.waiting` (a timer or an
 * event). What ends it: `node.succeeded`, `node.failed`, `node.retrying` (that attempt failed,
 * another follows), `node.interrupted`, `node.cancelled`. A bar with no end yet runs until `now`.
 */
import type { MapCounts, RunEvent, Visit } from "../types.js";

export type BarKind = "attempt" | "child" | "map" | "review" | "wait";
export type BarOutcome = "running" | "succeeded" | "failed" | "retried" | "interrupted" | "cancelled";

export interface Bar {
  kind: BarKind;
  attempt: number;
  start: number;
  /** Null while it runs (drawn until now). */
  end: number | null;
  outcome: BarOutcome;
  /** A child run's id (kind "child"). */
  childRunId?: string;
  /** What a wait waits for: `event <name>` or `timer`; a review's title. */
  note?: string;
}

export interface Row {
  nodeId: string;
  visit: number;
  /** "node", or "node #2" from its second visit on. */
  label: string;
  agentType: string | null;
  /** The visit's state when it is the current one (data.nodes); SKIPPED for an earlier one its event skipped; else null. */
  state: string | null;
  bars: Bar[];
  /** A map visit's item counts (current visits only). */
  items: MapCounts | null;
}

export interface Tick {
  at: number;
  label: string;
}

export interface Timeline {
  rows: Row[];
  /** The axis: from the run's start to a whole number of tick steps past its last moment. */
  start: number;
  end: number;
  ticks: Tick[];
}

const ENDS: Readonly<Record<string, BarOutcome>> = {
  "node.succeeded": "succeeded",
  "node.failed": "failed",
  "node.retrying": "retried",
  "node.interrupted": "interrupted",
  "node.cancelled": "cancelled",
};

/** Builds the timeline of a run from its events and visits, as it stands at `now`. */
export function buildTimeline(input: {
  events: readonly RunEvent[];
  visits: readonly Visit[];
  /** When the run started (the axis' origin) and ended (null: still going). */
  runStart: number;
  runEnd: number | null;
  now: number;
}): Timeline {
  const rows = new Map<string, Row>();
  const rowOf = (nodeId: string, visit: number): Row => {
    const key = `${nodeId}\u0000${visit}`;
    let row = rows.get(key);
    if (!row) {
      row = {
        nodeId,
        visit,
        label: visit > 1 ? `${nodeId} #${visit}` : nodeId,
        agentType: null,
        state: null,
        bars: [],
        items: null,
      };
      rows.set(key, row);
    }
    return row;
  };

  // When each row's visit first did anything (became ready, was skipped): its place when it has no bar.
  const firstSeen = new Map<Row, number>();
  for (const e of input.events) {
    if (e.node_id === null || e.visit === null) continue;
    const row = rowOf(e.node_id, e.visit);
    if (!firstSeen.has(row)) firstSeen.set(row, e.at);
    // An earlier visit is not among the current ones: its skip is known from its event only.
    if (e.type === "node.skipped") row.state = "SKIPPED";
    const open = row.bars.find((b) => b.end === null);
    const attempt = numberOr(e.data.attempt, (row.bars[row.bars.length - 1]?.attempt ?? 0) + 1);
    const begin = (bar: Omit<Bar, "start" | "end" | "outcome" | "attempt">) => {
      if (open) close(open, e.at, "interrupted");
      row.bars.push({ ...bar, attempt, start: e.at, end: null, outcome: "running" });
    };
    switch (e.type) {
      case "node.started": {
        const holder = typeof e.data.holder === "string" ? e.data.holder : "";
        if (holder.startsWith("run:")) begin({ kind: "child", childRunId: holder.slice("run:".length) });
        else if (holder === "map") begin({ kind: "map" });
        else begin({ kind: "attempt" });
        break;
      }
      case "review.requested":
        begin({ kind: "review", ...(typeof e.data.title === "string" ? { note: e.data.title } : {}) });
        break;
      case "node.waiting":
        begin({ kind: "wait", note: typeof e.data.event === "string" ? `event ${e.data.event}` : "timer" });
        break;
      default: {
        const outcome = ENDS[e.type];
        if (outcome && open) close(open, e.at, outcome);
      }
    }
  }

  for (const v of input.visits) {
    const row = rowOf(v.node_id, v.visit);
    row.agentType = v.agent_type;
    row.state = v.state;
    row.items = v.items ?? null;
  }

  // Rows in the order their visits first did something: their first bar, else their first event
  // (a skipped branch at its skip); those that did nothing yet, last.
  const at = (row: Row) => row.bars[0]?.start ?? firstSeen.get(row) ?? Number.POSITIVE_INFINITY;
  const ordered = [...rows.values()].sort((a, b) => at(a) - at(b));
  const last = Math.max(input.runEnd ?? input.now, ...ordered.flatMap((r) => r.bars.map((b) => b.end ?? input.now)));
  const axis = niceAxis(input.runStart, last);
  return { rows: ordered, ...axis };
}

function close(bar: Bar, at: number, outcome: BarOutcome): void {
  bar.end = Math.max(at, bar.start);
  bar.outcome = outcome;
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === "number" && Number.isInteger(value) ? value : fallback;
}

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** Tick steps, smallest first: the first that gives at most MAX_TICKS ticks is used. */
const STEPS = [
  1,
  2,
  5,
  10,
  20,
  50,
  100,
  200,
  500,
  SECOND,
  2 * SECOND,
  5 * SECOND,
  10 * SECOND,
  15 * SECOND,
  30 * SECOND,
  MINUTE,
  2 * MINUTE,
  5 * MINUTE,
  10 * MINUTE,
  15 * MINUTE,
  30 * MINUTE,
  HOUR,
  2 * HOUR,
  3 * HOUR,
  6 * HOUR,
  12 * HOUR,
  DAY,
];
const MAX_TICKS = 8;

/**
 * The axis from `start` to a whole number of steps covering `last`, with a tick at each step
 * labelled from the start in one unit (`0`, `0.5 s`, `1 s`, `1.5 s`; `0`, `15 s`, ..., `90 s`).
 * Rounding the end up keeps the scale still while a run goes on, so a running bar visibly grows
 * instead of the axis shrinking.
 */
export function niceAxis(start: number, last: number): { start: number; end: number; ticks: Tick[] } {
  const span = Math.max(last - start, 1);
  const step = STEPS.find((s) => span / s <= MAX_TICKS) ?? Math.ceil(span / MAX_TICKS / DAY) * DAY;
  const count = Math.max(1, Math.ceil(span / step));
  const unit = axisUnit(step);
  const ticks: Tick[] = [];
  for (let i = 0; i <= count; i++) ticks.push({ at: start + i * step, label: tickLabel(i * step, unit) });
  return { start, end: start + count * step, ticks };
}

export interface Unit {
  ms: number;
  name: string;
}

const UNITS: readonly Unit[] = [
  { ms: DAY, name: "d" },
  { ms: HOUR, name: "h" },
  { ms: MINUTE, name: "min" },
  { ms: SECOND, name: "s" },
  { ms: 1, name: "ms" },
];

/**
 * The one unit of an axis whose ticks are `step` apart: the largest in which a step is at least
 * 0.2 and has at most one decimal (every tick, a multiple of the step, then has at most one).
 * A 100 ms step counts in ms (a run under a second), a 500 ms step in seconds (`0.5 s`), a 15 s
 * step in seconds (`0.25 min` would be worse than `15 s`), a 30 s step in minutes (`0.5 min`).
 */
export function axisUnit(step: number): Unit {
  const tenths = (u: Unit) => (step * 10) / u.ms;
  return UNITS.find((u) => tenths(u) >= 2 && Number.isInteger(tenths(u))) ?? (UNITS[UNITS.length - 1] as Unit);
}

/** An offset from the run's start in `unit`: `0`, `1.5 s`, `75 s`, `2 min`. */
export function tickLabel(ms: number, unit: Unit): string {
  if (ms === 0) return "0";
  const tenths = Math.round((ms * 10) / unit.ms);
  const value = tenths % 10 === 0 ? String(tenths / 10) : (tenths / 10).toFixed(1);
  return `${value} ${unit.name}`;
}
