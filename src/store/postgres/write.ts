/**
 * The write batch on PostgreSQL (RunsTx.write): a whole batch in one statement, one round trip,
 * whatever its size, with the NOTIFY of what it made ready and, when nothing follows, the COMMIT.
 */
import type { Visit } from "../../core/types.js";
import type { WriteBatch, Written } from "../runs.js";
import { noticePayload } from "./ready-listener.js";
import {
  COMPENSATION_COLUMNS,
  type Columns,
  columnArrays,
  EVENT_COLUMNS,
  IMMUTABLE_COLUMNS,
  names,
  RUN_COLUMNS,
  RUN_KEPT_UNLESS_GIVEN,
  RUN_UPDATE_COLUMNS,
  runUpdateArrays,
  unnestSql,
  VISIT_COLUMNS,
} from "./rows.js";
import type { Query, TxQuery } from "./tx-query.js";

/** A transaction that can send its last statement with its COMMIT (PostgresTx). */
export interface TxWrite extends TxQuery {
  /** Runs the statement and commits in the same round trip; the transaction runs nothing more. */
  qCommit: Query;
}

/** `"a" = excluded."a", ...` / `"a" = u."a", ...` for every mutable column. */
function assignments<T>(columns: Columns<T>, source: string): string {
  return names(columns)
    .filter((c) => !IMMUTABLE_COLUMNS.has(c.slice(1, -1)))
    .map((c) =>
      RUN_KEPT_UNLESS_GIVEN.has(c.slice(1, -1)) ? `${c} = coalesce(${source}.${c}, r.${c})` : `${c} = ${source}.${c}`,
    )
    .join(", ");
}

/**
 * A whole write batch in one statement, one round trip: each kind of row in a data-modifying
 * CTE of its own, the NOTIFY in the last one (`notified` is read so that it runs). The CTEs
 * touch different rows (a run the batch inserts is not also in its updates, a run it touches
 * only for its revision is in neither), which is what one statement requires: they all see the
 * snapshot from before it.
 */
/** The parts of a write batch, in the statement's (and its parameters') order. */
const WRITE_PARTS = [
  "insertRuns",
  "updateRuns",
  "touchRuns",
  "updateVisits",
  "insertVisits",
  "compensations",
  "events",
  "notify",
] as const satisfies readonly (keyof WriteBatch | "touchRuns")[];

/**
 * The write statement for the parts a batch has (bit i: WRITE_PARTS[i]); the server plans and
 * runs only those. Its parameters: each present part's column arrays, in order.
 */
function writeSql(mask: number): string {
  let next = 1;
  const from = <T>(columns: Columns<T>, options: { ordinality?: boolean } = {}) => {
    const sql = unnestSql(columns, { ...options, firstParam: next });
    next += Object.keys(columns).length;
    return sql;
  };
  const has = (part: (typeof WRITE_PARTS)[number]) => (mask & (1 << WRITE_PARTS.indexOf(part))) !== 0;
  const parts: string[] = [];
  if (has("insertRuns")) {
    parts.push(`new_runs AS (INSERT INTO runs (${names(RUN_COLUMNS).join(", ")}) SELECT * FROM ${from(RUN_COLUMNS)})`);
  }
  const revised: string[] = [];
  if (has("updateRuns")) {
    parts.push(`changed_runs AS (UPDATE runs r SET ${assignments(RUN_UPDATE_COLUMNS, "u")}, revision = r.revision + 1
       FROM ${from(RUN_UPDATE_COLUMNS)} WHERE r.run_id = u.run_id RETURNING r.run_id, r.revision)`);
    revised.push("SELECT * FROM changed_runs");
  }
  if (has("touchRuns")) {
    // Runs whose visits or compensation rows change, not their own row: only their revision.
    parts.push(`touched_runs AS (UPDATE runs r SET revision = r.revision + 1 WHERE r.run_id = ANY($${next++}::text[])
       RETURNING r.run_id, r.revision)`);
    revised.push("SELECT * FROM touched_runs");
  }
  if (has("updateVisits")) {
    parts.push(`changed_visits AS (UPDATE visits v SET ${assignments(VISIT_COLUMNS, "u")} FROM ${from(VISIT_COLUMNS)}
       WHERE v.run_id = u.run_id AND v.node_id = u.node_id AND v.visit = u.visit)`);
  }
  if (has("insertVisits")) {
    parts.push(
      `new_visits AS (INSERT INTO visits (${names(VISIT_COLUMNS).join(", ")}) SELECT * FROM ${from(VISIT_COLUMNS)})`,
    );
  }
  if (has("compensations")) {
    parts.push(`compensations_written AS (INSERT INTO compensations (${names(COMPENSATION_COLUMNS).join(", ")})
       SELECT * FROM ${from(COMPENSATION_COLUMNS)}
       ON CONFLICT (run_id, seq) DO UPDATE SET ${assignments(COMPENSATION_COLUMNS, "excluded")})`);
  }
  const results: string[] = [];
  if (revised.length > 0) {
    results.push(
      `(SELECT json_agg(json_build_array(run_id, revision)) FROM (${revised.join(" UNION ALL ")}) AS t) AS revisions`,
    );
  }
  if (has("events")) {
    // Rows go in in the batch's order, so their seqs grow in that order.
    parts.push(`new_events AS (INSERT INTO events (${names(EVENT_COLUMNS).join(", ")})
       SELECT ${names(EVENT_COLUMNS).join(", ")} FROM ${from(EVENT_COLUMNS, { ordinality: true })}
       ORDER BY u.ordinality RETURNING seq)`);
    results.push("(SELECT array_agg(seq ORDER BY seq) FROM new_events) AS seqs");
  }
  if (has("notify")) {
    parts.push(
      `notified AS (SELECT pg_notify($${next}, t) FROM (SELECT DISTINCT unnest($${next + 1}::text[]) AS t) AS types)`,
    );
    results.push("(SELECT count(*) FROM notified) AS notified");
  }
  return `${parts.length > 0 ? `WITH ${parts.join(",\n")}\n` : ""}SELECT ${results.length > 0 ? results.join(", ") : "1"}`;
}

/** Write statements by mask, built when first needed. */
const writeStatements = new Map<number, { name: string; text: string }>();

function writeStatement(mask: number): { name: string; text: string } {
  let statement = writeStatements.get(mask);
  if (!statement) writeStatements.set(mask, (statement = { name: `skein_write_${mask}`, text: writeSql(mask) }));
  return statement;
}

/** Last one wins when a batch names the same row twice (one statement may not touch a row twice). */
function distinct<T>(rows: Iterable<T>, key: (row: T) => string): T[] {
  const byKey = new Map<string, T>();
  for (const row of rows) byKey.set(key(row), row);
  return [...byKey.values()];
}

const visitKey = (v: Visit) => `${v.run_id}\0${v.node_id}\0${v.visit}`;

/** Writes the batch; `channel`: the NOTIFY channel of the store's schema. `last`: sends the COMMIT with it. */
export async function write(tx: TxWrite, channel: string, batch: WriteBatch, last = false): Promise<Written> {
  const inserted = new Set(batch.insertRuns.map((r) => r.run_id));
  const updateRuns = distinct(batch.updateRuns, (r) => r.run_id).filter((r) => !inserted.has(r.run_id));
  const updated = new Set(updateRuns.map((r) => r.run_id));
  const touched = new Set(
    [...batch.updateVisits, ...batch.insertVisits, ...batch.compensations]
      .map((row) => row.run_id)
      .filter((id) => !inserted.has(id) && !updated.has(id)),
  );
  const rows = {
    insertRuns: columnArrays(RUN_COLUMNS, batch.insertRuns),
    updateRuns: runUpdateArrays(updateRuns),
    touchRuns: [[...touched]],
    updateVisits: columnArrays(VISIT_COLUMNS, distinct(batch.updateVisits, visitKey)),
    insertVisits: columnArrays(VISIT_COLUMNS, batch.insertVisits),
    compensations: columnArrays(
      COMPENSATION_COLUMNS,
      distinct(batch.compensations, (c) => `${c.run_id}\0${c.seq}`),
    ),
    events: columnArrays(EVENT_COLUMNS, batch.events),
    notify: batch.notify.length > 0 ? [channel, batch.notify.map(noticePayload)] : [],
  };
  let mask = 0;
  const values: unknown[] = [];
  WRITE_PARTS.forEach((part, i) => {
    const arrays = rows[part];
    // A part is present when it has rows: its first column array is not empty.
    if (part === "notify" ? arrays.length === 0 : (arrays[0] as unknown[]).length === 0) return;
    mask |= 1 << i;
    values.push(...arrays);
  });
  if (mask === 0) return { events: [], revisions: new Map() };
  type Row = { seqs: (number | string)[] | null; revisions: [string, number][] | null };
  // Nothing follows: the COMMIT goes with the write, one round trip less for every step.
  const [row] = await (last ? tx.qCommit<Row>(writeStatement(mask), values) : tx.q<Row>(writeStatement(mask), values));
  // RETURNING's order is not promised; the seqs, drawn in insertion order, are.
  const seqs = row?.seqs ?? [];
  return {
    events: batch.events.map((e, i) => ({ ...e, seq: Number(seqs[i]) })),
    revisions: new Map((row?.revisions ?? []).map(([id, revision]) => [id, Number(revision)])),
  };
}
