/**
 * The SQLite store's reads outside transactions (StoreReads, and the workflows' and engines'
 * reads), on the read connection: committed data only, WAL letting them run beside the writer.
 */
import type Database from "better-sqlite3";
import type { Compensation, Visit } from "../../core/types.js";
import { likeLiteral, type StoreGauges, type StoreReads, searchTextOf } from "../reads.js";
import { RATE_COLUMNS, type RateRow, rateBucketsOf } from "./claims.js";
import { PENDING_AND_HEARTBEAT, QUEUED_BY_REASON, READY_AHEAD, READY_BY_AGENT_TYPE } from "./gauges.js";
import { RUNS_WAITING_ON_KEY } from "./inbox.js";
import { type DbMapItem, LIST_MAP_ITEMS, mapItemFromDb } from "./map-items.js";
import {
  compensationFromDb,
  type DbCompensation,
  type DbEventBatch,
  type DbRun,
  type DbVisit,
  eventsOf,
  runFromDb,
  visitFromDb,
} from "./rows.js";
import { RUNS_BY_ID_PREFIX, RUNS_BY_ID_SUFFIX } from "./run-ids.js";
import { type DbSchedule, listSchedulesSql, SCHEDULE_BY_ID, scheduleFromDb } from "./schedules.js";
import { databaseError } from "./sqlite-errors.js";

/** A statement on the read connection, prepared once per SQL text. */
export type Read = (sql: string) => { get(...params: unknown[]): unknown; all(...params: unknown[]): unknown[] };

/**
 * `read` over a connection: each statement prepared once per SQL text. A failure of the file
 * itself (corruption found by this read) becomes a DatabaseError naming the path.
 */
export function readStatements(db: Database.Database, path: string): Read {
  const statements = new Map<string, Database.Statement>();
  const reading = <T>(fn: () => T): T => {
    try {
      return fn();
    } catch (e) {
      throw databaseError(e, path);
    }
  };
  return (sql) => {
    const statement = reading(() => {
      let found = statements.get(sql);
      if (!found) {
        found = db.prepare(sql);
        statements.set(sql, found);
      }
      return found;
    });
    return {
      get: (...params) => reading(() => statement.get(...params)),
      all: (...params) => reading(() => statement.all(...params)),
    };
  };
}

/** Visits waiting for a person, oldest first, with their run's trace and workflow; of the runs in a JSON list, unless it is null. */
const REVIEWS = `SELECT v.*, r.trace_id AS run_trace_id, r.workflow_id AS run_workflow_id
  FROM visits v JOIN runs r ON r.run_id = v.run_id
 WHERE v.state = 'IN_REVIEW' AND (@ids IS NULL OR v.run_id IN (SELECT value FROM json_each(@ids)))
 ORDER BY v.started_at, v.run_id`;

export function sqliteReads(read: Read): StoreReads {
  const listVisits: StoreReads["listVisits"] = async (runId, options = {}) => {
    const sql = options.currentOnly
      ? "SELECT * FROM visits WHERE run_id = ? AND is_current = 1 ORDER BY created_at, node_id"
      : "SELECT * FROM visits WHERE run_id = ? ORDER BY created_at, node_id, visit";
    return (read(sql).all(runId) as DbVisit[]).map(visitFromDb);
  };
  const getRun: StoreReads["getRun"] = async (runId) => {
    const row = read("SELECT * FROM runs WHERE run_id = ?").get(runId) as DbRun | undefined;
    return row ? runFromDb(row) : null;
  };
  const listCompensations = (runId: string): Compensation[] =>
    (read("SELECT * FROM compensations WHERE run_id = ? ORDER BY seq").all(runId) as DbCompensation[]).map(
      compensationFromDb,
    );
  return {
    getRun,
    readRun: async (runId) => {
      const run = await getRun(runId);
      if (!run) return null;
      const visits = await listVisits(runId, { currentOnly: true });
      return { run, visits, compensations: listCompensations(runId) };
    },
    findRunsByIdPart: async (part, limit) => {
      const find = (sql: string) => (read(sql).all({ part, limit }) as DbRun[]).map(runFromDb);
      return { prefix: find(RUNS_BY_ID_PREFIX), suffix: find(RUNS_BY_ID_SUFFIX) };
    },
    listRuns: async (filter) => {
      const where: string[] = [];
      const params: unknown[] = [];
      if (filter.status) {
        where.push("status = ?");
        params.push(filter.status);
      }
      if (filter.statuses) {
        where.push(filter.statuses.length === 0 ? "0" : `status IN (${filter.statuses.map(() => "?").join(", ")})`);
        params.push(...filter.statuses);
      }
      if (filter.workflow_version !== undefined) {
        where.push("workflow_version = ?");
        params.push(filter.workflow_version);
      }
      if (filter.top_level) where.push("parent IS NULL");
      if (filter.workflow_id) {
        where.push("workflow_id = ?");
        params.push(filter.workflow_id);
      } else where.push("instr(workflow_id, '/') = 0"); // not a map's item runs, unless asked for by id
      if (filter.workflow_ids) {
        where.push(
          filter.workflow_ids.length === 0 ? "0" : `workflow_id IN (${filter.workflow_ids.map(() => "?").join(", ")})`,
        );
        params.push(...filter.workflow_ids);
      }
      if (filter.schedule_id !== undefined) {
        where.push("schedule_id = ?");
        params.push(filter.schedule_id);
      }
      if (filter.id_prefix !== undefined) {
        where.push("run_id >= ? AND run_id < ? || char(65535)");
        params.push(filter.id_prefix, filter.id_prefix);
      }
      if (filter.id_contains !== undefined) {
        // LIKE is case-insensitive for ASCII (ids are ASCII); \, % and _ are taken literally.
        where.push("run_id LIKE ? ESCAPE '\\'");
        params.push(`%${likeLiteral(filter.id_contains)}%`);
      }
      if (filter.created_after !== undefined) {
        where.push("created_at >= ?");
        params.push(filter.created_after);
      }
      if (filter.created_before !== undefined) {
        where.push("created_at < ?");
        params.push(filter.created_before);
      }
      if (filter.q !== undefined) {
        // A phrase of the trigram index (migration 012): a double quote in it is written twice.
        // Rows 2 × id (input) and 2 × id + 1 (output) both belong to run_text_ids.id.
        // What is still queued for the index (migration 013: at most INDEX_TEXT_EVERY_MS of commits,
        // or a backlog) is read from the runs themselves, folded to lower case as the index is.
        where.push(`run_id IN (SELECT m.run_id FROM run_text t JOIN run_text_ids m ON m.id = t.rowid / 2
          WHERE run_text MATCH ?
        UNION SELECT m.run_id FROM run_text_queue q JOIN run_text_ids m ON m.id = q.k / 2
          JOIN runs r ON r.run_id = m.run_id
          WHERE skein_contains(CASE q.k % 2 WHEN 0 THEN r.input ELSE r.output END, ?))`);
        const text = searchTextOf(filter.q);
        params.push(`"${text.replaceAll('"', '""')}"`, text.toLowerCase());
      }
      if (filter.paused !== undefined) where.push(filter.paused ? "paused IS NOT NULL" : "paused IS NULL");
      for (const [name, value] of Object.entries(filter.tags ?? {})) {
        where.push("run_id IN (SELECT run_id FROM run_tags WHERE name = ? AND value = ?)");
        params.push(name, value);
      }
      if (filter.before) {
        where.push("(created_at, run_id) < (SELECT created_at, run_id FROM runs WHERE run_id = ?)");
        params.push(filter.before);
      }
      const sql = `SELECT * FROM runs ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
      ORDER BY created_at DESC, run_id DESC LIMIT ?`;
      const rows = read(sql).all(...params, filter.limit ?? 100) as DbRun[];
      return rows.map(runFromDb);
    },
    listChildren: async (runId) => {
      const sql = `SELECT json_extract(parent, '$.node_id') AS node_id, json_extract(parent, '$.visit') AS visit,
        json_extract(parent, '$.attempt') AS attempt, run_id, workflow_id, status
      FROM runs WHERE json_extract(parent, '$.run_id') = ? AND parent IS NOT NULL
        AND json_extract(parent, '$.item') IS NULL
      ORDER BY node_id, visit, attempt`;
      return read(sql).all(runId) as Awaited<ReturnType<StoreReads["listChildren"]>>;
    },
    listMapItems: async (key, options) => {
      const rows = read(LIST_MAP_ITEMS).all(key.run_id, key.node_id, key.visit, options.after, options.limit);
      return (rows as DbMapItem[]).map(mapItemFromDb);
    },
    listVisits,
    latestTerminalVisits: async (runId) => {
      const rows = read(
        `SELECT * FROM visits v WHERE run_id = ? AND state IN ('SUCCEEDED','FAILED','SKIPPED','CANCELLED')
         AND visit = (SELECT max(visit) FROM visits w WHERE w.run_id = v.run_id AND w.node_id = v.node_id
                      AND w.state IN ('SUCCEEDED','FAILED','SKIPPED','CANCELLED'))`,
      ).all(runId) as DbVisit[];
      return rows.map(visitFromDb);
    },
    listEvents: async (runId, options = {}) => {
      const after = options.afterSeq ?? 0;
      const limit = options.limit ?? 10_000;
      // A row per run and transaction (migration 020): each holds at least one event, so `limit`
      // rows hold enough.
      const rows = read(
        "SELECT last_seq, count, trace_id, events FROM event_batches WHERE run_id = ? AND last_seq > ? ORDER BY last_seq LIMIT ?",
      ).all(runId, after, limit) as DbEventBatch[];
      return eventsOf(runId, rows, after, limit);
    },
    runsWaitingOnKey: async (name, key, limit) =>
      (read(RUNS_WAITING_ON_KEY).all(name, key, limit) as { run_id: string }[]).map((r) => r.run_id),
    listReviews: async (runIds) => {
      // A null list is every run's reviews (as on PostgreSQL).
      const rows = read(REVIEWS).all({ ids: runIds === undefined ? null : JSON.stringify(runIds) }) as (DbVisit & {
        run_trace_id: string;
        run_workflow_id: string;
      })[];
      return rows.map(
        ({ run_trace_id, run_workflow_id, ...row }): Visit & { trace_id: string; workflow_id: string } => ({
          ...visitFromDb(row),
          trace_id: run_trace_id,
          workflow_id: run_workflow_id,
        }),
      );
    },
    readGauges: async (engineId, now) => {
      const ready = read(READY_BY_AGENT_TYPE).all({ now }) as StoreGauges["ready"];
      const queued = read(QUEUED_BY_REASON).all() as StoreGauges["queued"];
      const rest = read(PENDING_AND_HEARTBEAT).get({ now, engineId }) as Omit<StoreGauges, "ready" | "queued">;
      return { ready, queued, ...rest };
    },
    readyAhead: async (type, priority, now) =>
      (read(READY_AHEAD).get({ type, priority, now }) as { ahead: number }).ahead,
    readRateBuckets: async () =>
      rateBucketsOf(read(`SELECT agent_type, ${RATE_COLUMNS} FROM rate_buckets`).all() as RateRow[]),
    getSchedule: async (scheduleId) => {
      const row = read(SCHEDULE_BY_ID).get(scheduleId) as DbSchedule | undefined;
      return row ? scheduleFromDb(row) : null;
    },
    listSchedules: async (filter) => {
      const { sql, params } = listSchedulesSql(filter);
      return (read(sql).all(...params) as DbSchedule[]).map(scheduleFromDb);
    },
  };
}
