/**
 * The side-effect sink and the oracles of the fault-injection suite (FAULT-PLAN.md O1–O4, O6),
 * computed after a case from the database (read by a separate connection, as committed) and
 * the sink (what the agents really did, test/fixtures/fault-agents.mjs):
 * - runs lost: an acknowledged run that is missing, not final by T_max, final in a wrong way
 *   (the case's expectation), or with activity after its end (O1, O6);
 * - effects doubled beyond in-flight re-runs: an attempt run twice, an attempt run after its
 *   visit SUCCEEDED at an earlier one, or an attempt no claim started (O4; DESIGN §7: only an
 *   attempt in flight at a fault runs again, as a new attempt of the same execution_id);
 * - stale results applied: a success accepted from an attempt that was not the holder then
 *   (a later attempt had started, or it had already ended), a second success, or an attempt
 *   number claimed twice (two holders at once) (O2, O3).
 */
import { readFileSync } from "node:fs";
import { withDatabase } from "./read-db.js";

export interface SinkEntry {
  phase: "start" | "done";
  run_id: string;
  node_id: string;
  execution_id: string;
  attempt: number;
  pid: number;
  by: string;
}

/** Every whole line of the sink (a SIGKILL may tear the last line of a process: it is dropped). */
export function readSink(file: string): SinkEntry[] {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  const out: SinkEntry[] = [];
  for (const line of text.split("\n")) {
    if (line.length === 0) continue;
    try {
      out.push(JSON.parse(line) as SinkEntry);
    } catch {
      // a torn line of a killed process
    }
  }
  return out;
}

export interface RunRow {
  run_id: string;
  workflow_id: string;
  status: string;
  error: { reason?: string; message?: string } | null;
  needs_attention: boolean;
  created_at: number;
  deadline_at: number;
}
export interface VisitRow {
  run_id: string;
  node_id: string;
  visit: number;
  execution_id: string;
  state: string;
  attempt: number;
  interruptions: number;
  failures: number;
  is_current: boolean;
  reason: string | null;
  output: unknown;
}
export interface CompensationRow {
  run_id: string;
  seq: number;
  node_id: string;
  execution_id: string;
  state: string;
  attempt: number;
}
export interface EventRow {
  seq: number;
  run_id: string;
  type: string;
  node_id: string | null;
  visit: number | null;
  at: number;
  data: Record<string, unknown>;
}
export interface History {
  runs: RunRow[];
  visits: VisitRow[];
  compensations: CompensationRow[];
  events: EventRow[];
}

const parse = (v: unknown) => (typeof v === "string" ? JSON.parse(v) : v);

/**
 * The sink, then the history, in that order. An attempt runs only after its claim committed, so
 * every effect of a sink read first has its claim in a history read after it, even while an
 * engine still works; read the other way round, an attempt claimed between the two reads looks
 * like one that ran without a committed claim (a false "doubled").
 */
export async function readOutcome(
  database: string,
  sinkFile: string,
): Promise<{ history: History; sink: SinkEntry[] }> {
  const sink = readSink(sinkFile);
  return { sink, history: await readHistory(database) };
}

/** Everything committed in a database (`sqlite:<file>` or a postgres URL with `?schema=`). */
export async function readHistory(database: string): Promise<History> {
  const q = {
    runs: "SELECT run_id, workflow_id, status, error, needs_attention, created_at, deadline_at FROM runs",
    visits:
      "SELECT run_id, node_id, visit, execution_id, state, attempt, interruptions, failures, is_current, reason, output FROM visits",
    compensations: "SELECT run_id, seq, node_id, execution_id, state, attempt FROM compensations",
    events: "SELECT seq, run_id, type, node_id, visit, at, data FROM events ORDER BY seq",
  };
  const rows = await withDatabase(database, async (query) => ({
    runs: await query(q.runs),
    visits: await query(q.visits),
    compensations: await query(q.compensations),
    events: await query(q.events),
  }));
  return {
    runs: rows.runs.map((r) => ({
      ...(r as unknown as RunRow),
      error: parse(r.error) as RunRow["error"],
      needs_attention: Boolean(r.needs_attention),
      created_at: Number(r.created_at),
      deadline_at: Number(r.deadline_at),
    })),
    visits: rows.visits.map((v) => ({
      ...(v as unknown as VisitRow),
      is_current: Boolean(v.is_current),
      output: parse(v.output),
    })),
    compensations: rows.compensations.map((c) => c as unknown as CompensationRow),
    events: rows.events.map((e) => ({
      ...(e as unknown as EventRow),
      seq: Number(e.seq),
      at: Number(e.at),
      data: parse(e.data) as Record<string, unknown>,
    })),
  };
}

/** What a run must have become; a problem's text, or null when it ended as it should. */
export type Expectation = (run: RunRow, history: RunHistory) => string | null;

export interface RunHistory {
  visits: VisitRow[];
  compensations: CompensationRow[];
  events: EventRow[];
}

const FINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);
const END_EVENTS = new Set(["run.succeeded", "run.failed", "run.cancelled"]);
/** Events that may follow a run's end: late results refused, a notifier's failure. */
const AFTER_END = new Set(["result.fenced", "notify.failed", "run.warning"]);

/**
 * SUCCEEDED, or FAILED `interrupted` when one of its visits really was interrupted three times
 * (DESIGN §7: a poison task fails; several kills may hit one visit).
 */
export const succeeds: Expectation = (run, h) => {
  if (run.status === "SUCCEEDED") return null;
  if (run.status === "FAILED" && run.error?.reason === "interrupted" && h.visits.some((v) => v.interruptions >= 3)) {
    return null;
  }
  return `${run.status} (${run.error?.reason ?? "no reason"}: ${run.error?.message ?? ""})`;
};

export interface Figures {
  runs: number;
  lost: number;
  doubled: number;
  stale: number;
  /** One line per finding, for the assertion's message. */
  problems: string[];
}

/** The attempt key of an event: `<execution_id>#<attempt>` (compensation events name their execution_id). */
function attemptOf(e: EventRow): { id: string; attempt: number } | null {
  const attempt = e.data.attempt;
  if (typeof attempt !== "number") return null;
  if (e.type.startsWith("compensation.")) return { id: String(e.data.execution_id), attempt };
  if (e.node_id === null || e.visit === null) return null;
  return { id: `${e.run_id}:${e.node_id}:${e.visit}`, attempt };
}

export interface OracleOptions {
  /** What each run must end as. @defaultValue succeeds */
  expectation?: Expectation;
  /** Processes the case SIGKILLed mid-work: their attempts may have done their effect and still be re-run. */
  killed?: ReadonlySet<number>;
}

export function computeOracles(
  history: History,
  sink: SinkEntry[],
  acknowledged: readonly string[],
  options: OracleOptions = {},
): Figures {
  const expectation = options.expectation ?? succeeds;
  const killed = options.killed ?? new Set<number>();
  const problems: string[] = [];
  const byRun = new Map<string, RunHistory>();
  const of = (runId: string) => {
    let h = byRun.get(runId);
    if (!h) {
      h = { visits: [], compensations: [], events: [] };
      byRun.set(runId, h);
    }
    return h;
  };
  for (const v of history.visits) of(v.run_id).visits.push(v);
  for (const c of history.compensations) of(c.run_id).compensations.push(c);
  for (const e of history.events) of(e.run_id).events.push(e);
  const runs = new Map(history.runs.map((r) => [r.run_id, r]));

  // Runs lost (O1, O6).
  let lost = 0;
  for (const id of new Set(acknowledged)) {
    const run = runs.get(id);
    const h = of(id);
    let why: string | null = null;
    if (!run) why = "missing";
    else if (!FINAL.has(run.status)) why = `not final by T_max (${run.status})`;
    else {
      why = expectation(run, h);
      const end = h.events.findIndex((e) => END_EVENTS.has(e.type));
      const after = end < 0 ? [] : h.events.slice(end + 1).filter((e) => !AFTER_END.has(e.type));
      if (!why && end < 0) why = "no end event";
      if (!why && after.length > 0) why = `${after.map((e) => e.type).join(", ")} after its end`;
    }
    if (why) {
      lost += 1;
      problems.push(`lost: run ${id}: ${why}`);
    }
  }

  // Effects doubled beyond in-flight re-runs (O4).
  let doubled = 0;
  const started = new Set<string>();
  const succeededAt = new Map<string, number>();
  for (const e of history.events) {
    const a = attemptOf(e);
    if (!a) continue;
    if (e.type === "node.started" || e.type === "compensation.started") started.add(`${a.id}#${a.attempt}`);
  }
  for (const v of history.visits) if (v.state === "SUCCEEDED") succeededAt.set(v.execution_id, v.attempt);
  for (const c of history.compensations) if (c.state === "SUCCEEDED") succeededAt.set(c.execution_id, c.attempt);
  const calls = new Map<string, SinkEntry[]>();
  for (const s of sink) {
    if (s.phase !== "start") continue;
    const key = `${s.execution_id}#${s.attempt}`;
    calls.set(key, [...(calls.get(key) ?? []), s]);
  }
  for (const [key, list] of calls) {
    const first = list[0] as SinkEntry;
    if (list.length > 1) {
      doubled += list.length - 1;
      problems.push(`doubled: ${key} ran ${list.length} times (by ${list.map((s) => s.by).join(", ")})`);
    }
    const done = succeededAt.get(first.execution_id);
    if (done !== undefined && first.attempt > done) {
      doubled += 1;
      problems.push(`doubled: ${key} ran after attempt ${done} had succeeded`);
    } else if (runs.has(first.run_id) && !started.has(key)) {
      doubled += 1;
      problems.push(`doubled: ${key} ran without a committed claim (no started event)`);
    }
  }

  // An attempt that did its effect (its agent returned) and was then run again by another
  // attempt is a doubled effect, unless it was in flight at a fault: its process was killed, or
  // the engine ended it by time (an attempt timeout or a lost lease: a paused worker). An
  // engine's in-process attempt is re-run only when that engine is dead (DESIGN §7): a living,
  // paused engine's attempts must not be.
  const endedByTime = new Set<string>();
  for (const e of history.events) {
    const a = attemptOf(e);
    const reason = (e.data.error as { reason?: string } | undefined)?.reason ?? e.data.reason;
    if (a && (e.type.endsWith(".retrying") || e.type.endsWith(".failed"))) {
      if (reason === "timeout" || reason === "lease_expired") endedByTime.add(`${a.id}#${a.attempt}`);
    }
  }
  const doneBy = new Map<string, SinkEntry[]>();
  for (const s of sink) {
    if (s.phase === "done") doneBy.set(s.execution_id, [...(doneBy.get(s.execution_id) ?? []), s]);
  }
  for (const [id, list] of doneBy) {
    if (list.length < 2) continue;
    const kept = succeededAt.get(id) ?? (list.at(-1) as SinkEntry).attempt;
    for (const s of list) {
      if (s.attempt === kept) continue;
      if (killed.has(s.pid) || endedByTime.has(`${id}#${s.attempt}`)) continue;
      doubled += 1;
      problems.push(`doubled: ${id} attempt ${s.attempt} did its effect (by ${s.by}) and attempt ${kept} did it again`);
    }
  }

  // Stale results applied (O2, O3).
  let stale = 0;
  for (const [runId, h] of byRun) {
    const perId = new Map<string, EventRow[]>();
    for (const e of h.events) {
      const a = attemptOf(e);
      if (a) perId.set(a.id, [...(perId.get(a.id) ?? []), e]);
    }
    for (const [id, list] of perId) {
      // Attempt numbers only grow: a claim of an attempt already claimed means two holders at once.
      const claims = list.filter((e) => e.type.endsWith(".started")).map((e) => e.data.attempt as number);
      const repeated = claims.filter((a, k) => k > 0 && a <= (claims[k - 1] as number)).length;
      if (repeated > 0) {
        stale += repeated;
        problems.push(`stale: ${id} claimed as attempts ${claims.join(", ")} (numbers must only grow)`);
      }
      const successes = list.filter((e) => e.type === "node.succeeded" || e.type === "compensation.succeeded");
      if (successes.length > 1) {
        stale += successes.length - 1;
        problems.push(`stale: ${id} succeeded ${successes.length} times`);
      }
      for (const s of successes) {
        const attempt = s.data.attempt as number;
        const before = list.filter((e) => e.seq < s.seq);
        const lastStart = before.filter((e) => e.type.endsWith(".started")).at(-1);
        const ended = before.find(
          (e) =>
            e.data.attempt === attempt &&
            (e.type.endsWith(".retrying") ||
              e.type.endsWith(".failed") ||
              e.type === "node.interrupted" ||
              e.type === "node.cancelled"),
        );
        // A visit no agent holds (a review, an in-engine aggregator) has no attempt to fence.
        if (!list.some((e) => e.type.endsWith(".started"))) continue;
        if (lastStart?.data.attempt !== attempt) {
          stale += 1;
          problems.push(
            `stale: ${id} accepted attempt ${attempt} while attempt ${String(lastStart?.data.attempt)} held it (run ${runId})`,
          );
        } else if (ended) {
          stale += 1;
          problems.push(`stale: ${id} accepted attempt ${attempt} after it ended (${ended.type})`);
        }
      }
    }
  }
  return { runs: new Set(acknowledged).size, lost, doubled, stale, problems };
}

/** The case's one line: its figures and its seed (FAULT_SEED=<seed> runs it again). */
export function reportLine(name: string, f: Figures, seed: number, extra = ""): string {
  const line = `case ${name}: runs ${f.runs}, lost ${f.lost}, doubled ${f.doubled}, stale applied ${f.stale} (seed ${seed})${extra ? `; ${extra}` : ""}`;
  process.stdout.write(`${line}\n`);
  return line;
}
