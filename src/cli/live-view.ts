/**
 * Live progress of one run while this process's engine runs it: on a terminal, a table of nodes
 * redrawn in place (ANSI cursor movement); otherwise one line per event, which suits logs and
 * pipes. Both are fed the run's events as the engine publishes them. The table shows, under a
 * running node, the last line of its latest progress (DESIGN §11.6); the lines leave progress
 * out (one line per value would drown the events).
 */
import { isTextDelta } from "../core/progress.js";
import type { Json, MapCounts, ProgressEvent, RunEvent, RunWithNodes, Visit } from "../index.js";
import { withMapNote } from "./map-note.js";
import { reviewCommand } from "./options.js";
import { formatMs, oneLine } from "./output.js";
import { visitWaitNote, waitNote } from "./waiting.js";

export interface LiveView {
  event(e: RunEvent): void;
  /** A running attempt's progress (live only, never stored). */
  progress(e: ProgressEvent): void;
  /** Draws the last state and releases the terminal. */
  stop(): void;
}

/** One node's row: its current visit as the events describe it. */
export interface NodeRow {
  node_id: string;
  /** A visit state, or READY for a PENDING visit that waits only for capacity. */
  state: string;
  visit: number;
  attempt: number;
  startedAt: number | null;
  endedAt: number | null;
  /** The last error (or why it was skipped or cancelled). */
  note: string;
  /** A map node's item counts (from the stored run: items end without an event of this run). */
  items: MapCounts | null;
  /** IN_REVIEW: the first of the review's assignees (null: anyone may decide). */
  assignee: string | null;
}

/** The run's nodes, seeded from the stored run and kept current by its events. */
export class RunProgress {
  readonly rows = new Map<string, NodeRow>();
  /** Each node's latest progress as one line, by node; shown while that visit's attempt runs. */
  private readonly live = new Map<string, { visit: number; attempt: number; line: string; text: string | null }>();
  status: string;
  endedAt: number | null;

  /** `db`: the database to name in the commands shown (when the user gave --db). */
  constructor(
    readonly run: RunWithNodes,
    private readonly db?: string,
  ) {
    this.status = run.status;
    this.endedAt = run.ended_at;
    for (const v of run.nodes) this.rows.set(v.node_id, rowOf(v));
  }

  /** The command that decides the review a row waits for, or null when the row waits for none. */
  reviewCommand(row: NodeRow): string | null {
    return row.state === "IN_REVIEW" ? reviewCommand(this.run.run_id, row.node_id, row.assignee, this.db) : null;
  }

  /** True when the run has map nodes, whose counts only a read of the run (`counts`) keeps current. */
  get hasMaps(): boolean {
    return this.run.nodes.some((v) => v.agent_type === "map");
  }

  /** Takes the map counts of a fresh read of the run, for the rows still at the same visit. */
  counts(run: RunWithNodes): void {
    for (const v of run.nodes) {
      const row = this.rows.get(v.node_id);
      if (row && row.visit === v.visit) row.items = v.items;
    }
  }

  /**
   * Keeps a progress value's last line for its node. It may arrive before the stored
   * node.started that makes the row RUNNING (stored events are read, progress is pushed).
   */
  applyProgress(e: ProgressEvent): void {
    const row = this.rows.get(e.node_id);
    if (row && e.visit < row.visit) return;
    const p = e.data.progress;
    const delta = isTextDelta(p) ? p.delta : null;
    const kept = this.live.get(e.node_id);
    // Deltas join into the attempt's text so far; another attempt or visit starts again.
    const same = kept !== undefined && kept.visit === e.visit && kept.attempt === e.data.attempt;
    const text = delta === null ? null : (same && kept.text !== null ? kept.text : "") + delta;
    const line = text === null ? progressLine(p) : progressLine(text);
    this.live.set(e.node_id, { visit: e.visit, attempt: e.data.attempt, line, text });
  }

  /** The line under a row: its running attempt's latest progress, or null. */
  liveLine(row: NodeRow): string | null {
    const live = this.live.get(row.node_id);
    if (!live || row.state !== "RUNNING" || live.visit !== row.visit || live.attempt !== row.attempt) return null;
    return live.line;
  }

  apply(e: RunEvent): void {
    if (e.type === "run.succeeded" || e.type === "run.failed" || e.type === "run.cancelled") {
      this.status = typeof e.data.status === "string" ? e.data.status : this.status;
      this.endedAt = e.at;
      return;
    }
    if (e.type === "compensation.planned") {
      this.status = "COMPENSATING";
      return;
    }
    if (e.type === "run.retried") {
      this.status = "RUNNING";
      this.endedAt = null;
      return;
    }
    if (e.type === "run.migrated") {
      // The nodes new in the run's new version got visits (no event of their own unless they become ready).
      const added = Array.isArray(e.data.added) ? e.data.added.filter((x) => typeof x === "string") : [];
      for (const id of added) if (!this.rows.has(id)) this.rows.set(id, freshRow(id, 1));
      return;
    }
    if (e.type === "loop.reset") {
      // The region's nodes get new visits (no event of their own) unless still PENDING.
      const region = Array.isArray(e.data.region) ? e.data.region.filter((x) => typeof x === "string") : [];
      for (const id of region) {
        const row = this.rows.get(id);
        if (!row) continue;
        if (row.state === "PENDING" || row.state === "READY") row.state = "PENDING";
        else this.rows.set(id, freshRow(id, row.visit + 1));
      }
      return;
    }
    if (e.node_id === null || e.visit === null) return;
    let row = this.rows.get(e.node_id);
    if (!row || e.visit > row.visit) {
      row = freshRow(e.node_id, e.visit);
      this.rows.set(e.node_id, row);
    } else if (e.visit < row.visit) {
      return; // a superseded visit (cancelled by a loop reset)
    }
    const attempt = typeof e.data.attempt === "number" ? e.data.attempt : row.attempt;
    switch (e.type) {
      case "node.ready":
        row.state = "READY";
        break;
      case "node.started":
        row.state = "RUNNING";
        row.attempt = attempt;
        row.startedAt ??= e.at;
        row.endedAt = null;
        break;
      case "node.retrying":
        row.state = "RETRYING";
        row.note = errorMessage(e) ?? row.note;
        break;
      case "node.interrupted":
        row.state = "RETRYING";
        row.note = `attempt ${attempt} interrupted: its engine stopped`;
        break;
      case "node.waiting":
        row.state = "WAITING";
        row.attempt = attempt;
        row.startedAt ??= e.at;
        row.endedAt = null;
        row.note = waitNote(e.data) || row.note;
        break;
      case "review.requested":
        row.state = "IN_REVIEW";
        row.attempt = attempt;
        row.startedAt ??= e.at;
        row.endedAt = null;
        row.note = `waiting for ${reviewers(e.data.assignees)}`;
        row.assignee = firstAssignee(e.data.assignees);
        break;
      case "child.started":
        row.note = `child run ${e.data.run_id}`;
        break;
      case "compensation.succeeded":
        row.note = "undone (compensation succeeded)";
        break;
      case "compensation.failed":
        row.note = `compensation failed: ${errorMessage(e) ?? e.data.reason}`;
        break;
      case "node.succeeded":
      case "node.failed":
      case "node.skipped":
      case "node.cancelled":
        row.state = e.type.slice("node.".length).toUpperCase();
        row.attempt = attempt;
        row.endedAt = e.at;
        row.note = errorMessage(e) ?? (typeof e.data.reason === "string" ? e.data.reason : row.note);
        break;
      default:
        break;
    }
    // Ended (or waiting to retry): its progress is cleared, unless it is of a later visit already.
    const live = this.live.get(e.node_id);
    if (live && row.state !== "RUNNING" && live.visit <= e.visit) this.live.delete(e.node_id);
  }
}

/**
 * A progress value as one line: a string's last line, `{ content }`'s last line (the `llm`
 * node's), else compact JSON. Text keeps its end when cut (where a stream grows), JSON its start.
 */
export function progressLine(value: Json): string {
  const content =
    value !== null && typeof value === "object" && !Array.isArray(value) && typeof value.content === "string"
      ? value.content
      : null;
  const text = typeof value === "string" ? value : content;
  if (text === null) return JSON.stringify(value);
  const trimmed = text.trimEnd();
  return trimmed.slice(trimmed.lastIndexOf("\n") + 1).trim();
}

/** A text cut to `max` characters from its end (the latest of a growing stream), or whole. */
function tailOf(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ");
  return flat.length > max ? `…${flat.slice(flat.length - max + 1)}` : flat;
}

function rowOf(v: Visit): NodeRow {
  return {
    node_id: v.node_id,
    state: v.state === "PENDING" && v.ready_at !== null ? "READY" : v.state,
    visit: v.visit,
    attempt: v.attempt,
    startedAt: v.started_at,
    endedAt: v.ended_at,
    note: visitWaitNote(v) ?? v.error?.message ?? v.reason ?? "",
    items: v.items,
    assignee: firstAssignee((v.payload as { assignees?: unknown } | null)?.assignees),
  };
}

function freshRow(node_id: string, visit: number): NodeRow {
  const row = { node_id, state: "PENDING", visit, attempt: 0, startedAt: null, endedAt: null, note: "" };
  return { ...row, items: null, assignee: null };
}

function firstAssignee(assignees: unknown): string | null {
  const first: unknown = Array.isArray(assignees) ? assignees[0] : undefined;
  return typeof first === "string" ? first : null;
}

/** `ops-lead or finance`; `anyone` when the review names no assignees. */
function reviewers(assignees: unknown): string {
  return Array.isArray(assignees) && assignees.length > 0 ? assignees.join(" or ") : "anyone";
}

function errorMessage(e: RunEvent): string | undefined {
  const error = e.data.error;
  if (error && typeof error === "object" && !Array.isArray(error) && typeof error.message === "string") {
    return error.message;
  }
  return undefined;
}

/** One event as a line: `    123 ms  node.started    fetch_a#1 attempt 1` (time since `origin`). */
export function formatEventLine(e: RunEvent, origin: number): string {
  const at = `${String(Math.max(0, e.at - origin)).padStart(7)} ms`;
  const where = e.node_id === null ? "" : `${e.node_id}#${e.visit}`;
  return `${at}  ${e.type.padEnd(15)} ${[where, describe(e)].filter(Boolean).join(" ")}`.trimEnd();
}

function describe(e: RunEvent): string {
  const d = e.data;
  const attempt = `attempt ${d.attempt}`;
  const list = (x: unknown) => (Array.isArray(x) ? x.join(", ") : "");
  switch (e.type) {
    case "run.started":
      return `workflow ${d.workflow_id} v${d.workflow_version}`;
    case "run.succeeded":
    case "run.failed":
    case "run.cancelled":
      return [d.status, errorMessage(e)].filter(Boolean).join(": ");
    case "run.warning":
      return String(d.message ?? "");
    case "node.ready": {
      const t = d.trigger as { node_id?: string; visit?: number } | undefined;
      return t?.node_id ? `after ${t.node_id}#${t.visit}` : "";
    }
    case "node.started":
      return attempt;
    case "node.succeeded":
      if (d.end === true) return `${attempt} -> $end`;
      return list(d.fired) ? `${attempt} -> ${list(d.fired)}` : attempt;
    case "node.retrying": {
      const wait = typeof d.retry_at === "number" ? `; retry in ${formatMs(d.retry_at - e.at)}` : "";
      return `${attempt} failed: ${oneLine(errorMessage(e) ?? "", 120)}${wait}`;
    }
    case "node.interrupted":
      return `${attempt} interrupted: its engine stopped`;
    case "node.failed":
      return `${d.reason}: ${oneLine(errorMessage(e) ?? "", 120)}${d.handled === true ? " (handled)" : ""}`;
    case "node.skipped":
    case "node.cancelled":
      return String(d.reason ?? "");
    case "branch.none":
      return "no case held: the branch ends";
    case "loop.reset":
      return `-> ${d.target} (resets ${list(d.region)})`;
    case "result.fenced":
      return "late result ignored";
    case "child.started":
      return `${attempt}: child run ${d.run_id}`;
    case "child.ended": {
      const why = errorMessage(e);
      return `${attempt}: child run ${d.run_id} ${d.status}${why ? `: ${oneLine(why, 120)}` : ""}`;
    }
    case "node.waiting":
      return `${attempt}: waiting for ${waitNote(d)}`;
    case "event.received":
    case "event.delivered":
      return `event "${d.name}"${typeof d.key === "string" ? ` (key ${d.key})` : ""}`;
    case "review.requested":
      return `waiting for ${reviewers(d.assignees)}${typeof d.title === "string" ? `: ${oneLine(d.title, 80)}` : ""}`;
    case "review.decided":
      return `${d.decision} by ${d.by ?? "a reviewer"}${typeof d.comment === "string" ? `: ${oneLine(d.comment, 80)}` : ""}`;
    case "run.retried":
      return `runs again: ${list(d.nodes)}${typeof d.from === "string" ? ` (from ${d.from})` : ""}`;
    case "run.forked":
      return `from ${d.from_node_id} of run ${d.from_run_id}; kept: ${list(d.copied) || "-"}`;
    case "run.migrated":
      return `moved to version ${d.to_version} from ${d.from_version}${list(d.added) ? `; new nodes: ${list(d.added)}` : ""}`;
    case "run.needs_attention":
      return String(d.message ?? "");
    case "run.paused":
      return `paused by ${d.by ?? "someone"}${typeof d.reason === "string" ? `: ${oneLine(d.reason, 120)}` : ""}`;
    case "run.resumed":
      return `resumed by ${d.by ?? "someone"}${typeof d.failed === "string" ? ` (node ${d.failed} failed)` : ""}`;
    case "compensation.planned": {
      const rows = Array.isArray(d.compensations) ? d.compensations : [];
      const names = rows.map((c) => {
        const r = c as { node_id?: unknown; visit?: unknown };
        return `${r.node_id}#${r.visit}`;
      });
      return names.length > 0 ? `undo ${names.join(", ")}` : "nothing to undo";
    }
    case "compensation.started":
    case "compensation.succeeded":
      return attempt;
    case "compensation.retrying": {
      const wait = typeof d.retry_at === "number" ? `; retry in ${formatMs(d.retry_at - e.at)}` : "";
      return `${attempt} failed: ${oneLine(errorMessage(e) ?? "", 120)}${wait}`;
    }
    case "compensation.failed":
      return `${d.reason}: ${oneLine(errorMessage(e) ?? "", 120)}`;
    case "compensation.skipped":
      return String(d.reason ?? "");
    default:
      return "";
  }
}

/** One line per event, for pipes and logs; a review requested is followed by the command that decides it. */
export function lineView(write: (text: string) => void, progress: RunProgress): LiveView {
  return {
    progress: () => {}, // too chatty for a log: one line per value (docs/cli.md says so)
    event: (e) => {
      progress.apply(e);
      write(`${formatEventLine(e, progress.run.created_at)}\n`);
      const row = e.type === "review.requested" && e.node_id !== null ? progress.rows.get(e.node_id) : undefined;
      const command = row && row.visit === e.visit ? progress.reviewCommand(row) : null;
      if (command) write(`${" ".repeat(12)}to decide: ${command}\n`);
    },
    stop: () => {},
  };
}

const COLORS: Record<string, string> = {
  RUNNING: "36",
  READY: "34",
  RETRYING: "33",
  IN_REVIEW: "35",
  WAITING: "35",
  SUCCEEDED: "32",
  FAILED: "31",
  CANCELLED: "2",
  SKIPPED: "2",
};

/** The table's lines at time `now`, each at most `width` characters wide (colour codes aside). */
export function renderTable(progress: RunProgress, now: number, width: number, color: boolean): string[] {
  const run = progress.run;
  const paint = (state: string, text: string) =>
    color && COLORS[state] ? `\x1b[${COLORS[state]}m${text}\x1b[0m` : text;
  const title = `run ${run.run_id}  ${run.workflow_id} v${run.workflow_version}  `;
  const lines = [
    `${title}${paint(progress.status, progress.status)}  ${formatMs((progress.endedAt ?? now) - run.created_at)}`,
  ];
  const rows = [...progress.rows.values()];
  const cells = rows.map((r) => [
    r.node_id,
    r.state,
    String(r.visit),
    String(r.attempt),
    r.startedAt === null ? "-" : formatMs((r.endedAt ?? now) - r.startedAt),
  ]);
  const headers = ["node", "state", "visit", "attempt", "elapsed"];
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] ?? "").length)));
  const fixed = widths.reduce((a, b) => a + b + 2, 0);
  const noteWidth = width - fixed - 1;
  const line = (c: string[], state: string | null, note: string) => {
    const padded = c.map((x, i) => x.padEnd(widths[i] ?? 0));
    if (state !== null) padded[1] = paint(state, padded[1] ?? "");
    const tail = noteWidth > 10 && note ? oneLine(note, noteWidth) : "";
    return `${padded.join("  ")}  ${tail}`.trimEnd();
  };
  lines.push(line(headers, null, "note"));
  rows.forEach((r, i) => {
    lines.push(line(cells[i] ?? [], r.state, withMapNote(r.items, r.note)));
    // Never cut: it is there to be copied whole.
    const command = progress.reviewCommand(r);
    if (command) lines.push(`  to decide: ${command}`);
    const live = progress.liveLine(r);
    if (live) {
      const room = Math.max(10, width - 4);
      const text = live.startsWith("{") || live.startsWith("[") ? oneLine(live, room) : tailOf(live, room);
      lines.push(`  ${color ? `\x1b[2m${text}\x1b[0m` : text}`);
    }
  });
  return lines;
}

/** A table of the run's nodes, redrawn in place on `out` (a TTY). */
export function tableView(out: NodeJS.WriteStream, progress: RunProgress): LiveView {
  const color = !process.env.NO_COLOR;
  let drawn = 0;
  let pending: NodeJS.Timeout | null = null;
  const draw = () => {
    pending = null;
    let lines = renderTable(progress, Date.now(), out.columns || 120, color);
    // Redrawing in place only works for what fits on the screen.
    const room = Math.max(3, (out.rows || 40) - 1);
    if (lines.length > room) lines = [...lines.slice(0, room - 1), `... ${lines.length - room + 1} more nodes`];
    let text = drawn > 0 ? `\x1b[${drawn}F` : "";
    for (const l of lines) text += `\x1b[2K${l}\n`;
    out.write(`${text}\x1b[0J`);
    drawn = lines.length;
  };
  // The cursor is hidden while drawing; shown again however the process ends.
  const showCursor = () => out.write("\x1b[?25h");
  process.once("exit", showCursor);
  out.write("\x1b[?25l");
  draw();
  const ticker = setInterval(draw, 250);
  return {
    event(e) {
      progress.apply(e);
      pending ??= setTimeout(draw, 30);
    },
    progress(e) {
      progress.applyProgress(e);
      pending ??= setTimeout(draw, 30);
    },
    stop() {
      clearInterval(ticker);
      if (pending) clearTimeout(pending);
      draw();
      process.off("exit", showCursor);
      showCursor();
    },
  };
}
