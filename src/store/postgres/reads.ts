/** The PostgreSQL store's reads outside transactions (StoreReads), each on any free pooled connection. */
import type pg from "pg";
import type { MapItem, Run, RunEvent, Schedule, Visit } from "../../core/types.js";
import type { RateBucket } from "../claims.js";
import {
  type ChildRun,
  likeLiteral,
  type RunFilter,
  type StoreGauges,
  type StoreReads,
  searchTextOf,
} from "../reads.js";
import type { LoadedRun, VisitKey } from "../runs.js";
import type { ScheduleFilter } from "../schedules.js";
import { RATE_COLUMNS, type RateRow, rateBucketsOf } from "./claims.js";
import { gaugeStatements } from "./gauges.js";
import { RUNS_WAITING_ON_KEY } from "./inbox.js";
import { type DbMapItem, LIST_MAP_ITEMS, mapItemFromDb } from "./map-items.js";
import {
  type DbEvent,
  type DbRun,
  type DbVisit,
  eventFromDb,
  RUN_COLUMNS,
  runFromDb,
  STORED_EVENT_COLUMNS,
  selectList,
  VISIT_COLUMNS,
  visitFromDb,
} from "./rows.js";
import { runIdStatements } from "./run-ids.js";
import { type LoadedRunRow, loadRunsSql, runRead } from "./runs.js";
import { listSchedulesSql, SCHEDULE_BY_ID, scheduleFromDb } from "./schedules.js";
import { DB_NOW } from "./tx-query.js";

/** One statement outside any transaction (PostgresStore.read: tried again when its connection was lost). */
export type Read = <R extends object>(config: pg.QueryConfig, attempts?: number) => Promise<R[]>;

const RUNS = selectList(RUN_COLUMNS);
const RUN_ID_STATEMENTS = runIdStatements(RUNS);
const VISITS = selectList(VISIT_COLUMNS);
const GAUGES = gaugeStatements(DB_NOW);

/** `clock`: the store's injected clock; without one, the gauges are read at the database's time. */
export function postgresReads(read: Read, clock: { now(): number } | undefined): StoreReads {
  return {
    async getRun(runId: string): Promise<Run | null> {
      const [row] = await read<DbRun>({
        name: "skein_get_run",
        text: `SELECT ${RUNS} FROM runs WHERE run_id = $1`,
        values: [runId],
      });
      return row ? runFromDb(row) : null;
    },

    async readRun(runId: string): Promise<LoadedRun | null> {
      const [row] = await read<LoadedRunRow>({
        name: "skein_read_run",
        text: loadRunsSql("ARRAY[$1::text]", "ARRAY[NULL::bigint]"),
        values: [runId],
      });
      const loaded = row ? runRead(row) : null;
      return loaded && "run" in loaded ? loaded : null;
    },

    async listChildren(runId: string): Promise<ChildRun[]> {
      return read<ChildRun>({
        name: "skein_list_children",
        text: `SELECT parent->>'node_id' AS node_id, (parent->>'visit')::int AS visit, (parent->>'attempt')::int AS attempt,
            run_id, workflow_id, status
          FROM runs WHERE parent->>'run_id' = $1 AND parent IS NOT NULL AND parent->>'item' IS NULL
          ORDER BY 1, 2, 3`,
        values: [runId],
      });
    },

    async listMapItems(key: VisitKey, options: { after: number; limit: number }): Promise<MapItem[]> {
      const rows = await read<DbMapItem>({
        ...LIST_MAP_ITEMS,
        values: [key.run_id, key.node_id, key.visit, options.after, options.limit],
      });
      return rows.map(mapItemFromDb);
    },

    async findRunsByIdPart(part: string, limit: number): Promise<{ prefix: Run[]; suffix: Run[] }> {
      const [prefix, suffix] = await Promise.all([
        read<DbRun>({ ...RUN_ID_STATEMENTS.prefix, values: [part, limit] }),
        read<DbRun>({ ...RUN_ID_STATEMENTS.suffix, values: [part, limit] }),
      ]);
      return { prefix: prefix.map(runFromDb), suffix: suffix.map(runFromDb) };
    },

    async listRuns(filter: RunFilter): Promise<Run[]> {
      const where: string[] = [];
      const values: unknown[] = [];
      const param = (value: unknown) => {
        values.push(value);
        return `$${values.length}`;
      };
      if (filter.status) where.push(`status = ${param(filter.status)}`);
      if (filter.statuses) where.push(`status = ANY(${param(filter.statuses)}::text[])`);
      if (filter.workflow_version !== undefined) where.push(`workflow_version = ${param(filter.workflow_version)}`);
      if (filter.top_level) where.push("parent IS NULL");
      if (filter.workflow_id) where.push(`workflow_id = ${param(filter.workflow_id)}`);
      else where.push("strpos(workflow_id, '/') = 0"); // not a map's item runs, unless asked for by id
      if (filter.workflow_ids) where.push(`workflow_id = ANY(${param(filter.workflow_ids)}::text[])`);
      if (filter.schedule_id !== undefined) where.push(`schedule_id = ${param(filter.schedule_id)}`);
      if (filter.id_prefix !== undefined) {
        const prefix = param(filter.id_prefix);
        where.push(`run_id >= ${prefix} AND run_id < ${prefix} || chr(65535)`);
      }
      if (filter.id_contains !== undefined) where.push(`run_id ILIKE ${param(`%${likeLiteral(filter.id_contains)}%`)}`);
      if (filter.created_after !== undefined) where.push(`created_at >= ${param(filter.created_after)}`);
      if (filter.created_before !== undefined) where.push(`created_at < ${param(filter.created_before)}`);
      if (filter.q !== undefined) {
        // ILIKE with the trigram indexes of migration 012; \, % and _ are taken literally.
        const pattern = param(`%${likeLiteral(searchTextOf(filter.q))}%`);
        // Map item runs are not searched (nor indexed), as on SQLite.
        where.push(`strpos(workflow_id, '/') = 0 AND (input::text ILIKE ${pattern} OR output::text ILIKE ${pattern})`);
      }
      if (filter.paused !== undefined) where.push(filter.paused ? "paused IS NOT NULL" : "paused IS NULL");
      if (filter.tags && Object.keys(filter.tags).length > 0) {
        where.push(`tags @> ${param(JSON.stringify(filter.tags))}::jsonb`);
      }
      if (filter.before) {
        where.push(
          `(created_at, run_id) < (SELECT created_at, run_id FROM runs WHERE run_id = ${param(filter.before)})`,
        );
      }
      const text = `SELECT ${RUNS} FROM runs ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
        ORDER BY created_at DESC, run_id DESC LIMIT ${param(filter.limit ?? 100)}`;
      return (await read<DbRun>({ text, values })).map(runFromDb);
    },

    async listVisits(runId: string, options: { currentOnly?: boolean } = {}): Promise<Visit[]> {
      const rows = await read<DbVisit>(
        options.currentOnly
          ? {
              name: "skein_current_visits",
              text: `SELECT ${VISITS} FROM visits WHERE run_id = $1 AND is_current ORDER BY created_at, node_id`,
              values: [runId],
            }
          : {
              name: "skein_visits",
              text: `SELECT ${VISITS} FROM visits WHERE run_id = $1 ORDER BY created_at, node_id, visit`,
              values: [runId],
            },
      );
      return rows.map(visitFromDb);
    },

    async latestTerminalVisits(runId: string): Promise<Visit[]> {
      const rows = await read<DbVisit>({
        name: "skein_latest_terminal_visits",
        text: `SELECT DISTINCT ON (node_id) ${VISITS} FROM visits
                WHERE run_id = $1 AND state IN ('SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED')
                ORDER BY node_id, visit DESC`,
        values: [runId],
      });
      return rows.map(visitFromDb);
    },

    async listEvents(runId: string, options: { afterSeq?: number; limit?: number } = {}): Promise<RunEvent[]> {
      const rows = await read<DbEvent>({
        name: "skein_events",
        text: `SELECT ${selectList(STORED_EVENT_COLUMNS)} FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
        values: [runId, options.afterSeq ?? 0, options.limit ?? 10_000],
      });
      return rows.map(eventFromDb);
    },

    async runsWaitingOnKey(name: string, key: string, limit: number): Promise<string[]> {
      const rows = await read<{ run_id: string }>({ text: RUNS_WAITING_ON_KEY, values: [name, key, limit] });
      return rows.map((r) => r.run_id);
    },

    async listReviews(runIds?: readonly string[]): Promise<(Visit & { trace_id: string; workflow_id: string })[]> {
      const rows = await read<DbVisit & { run_trace_id: string; run_workflow_id: string }>({
        name: "skein_reviews",
        // NULLS FIRST: SQLite's order. A null array is every run's reviews.
        text: `SELECT ${selectList(VISIT_COLUMNS, "v")}, r.trace_id AS run_trace_id, r.workflow_id AS run_workflow_id
                 FROM visits v JOIN runs r ON r.run_id = v.run_id
                WHERE v.state = 'IN_REVIEW' AND ($1::text[] IS NULL OR v.run_id = ANY ($1::text[]))
                ORDER BY v.started_at NULLS FIRST, v.run_id`,
        values: [runIds ?? null],
      });
      return rows.map(({ run_trace_id, run_workflow_id, ...row }) => ({
        ...visitFromDb(row),
        trace_id: run_trace_id,
        workflow_id: run_workflow_id,
      }));
    },

    async readGauges(engineId: string, now: number): Promise<StoreGauges> {
      const at = clock ? now : null;
      const [ready, queued, [rest]] = await Promise.all([
        read<StoreGauges["ready"][number]>({ ...GAUGES.ready, values: [at] }),
        read<StoreGauges["queued"][number]>(GAUGES.queued),
        read<Omit<StoreGauges, "ready" | "queued">>({ ...GAUGES.pending, values: [at, engineId] }),
      ]);
      return { ready, queued, ...(rest as Omit<StoreGauges, "ready" | "queued">) };
    },

    async readyAhead(agentType: string, priority: number, now: number): Promise<number> {
      const [row] = await read<{ ahead: number }>({
        ...GAUGES.ahead,
        values: [clock ? now : null, agentType, priority],
      });
      return Number(row?.ahead ?? 0);
    },

    async readRateBuckets(): Promise<Map<string, RateBucket>> {
      return rateBucketsOf(await read<RateRow>({ text: `SELECT agent_type, ${RATE_COLUMNS} FROM rate_buckets` }));
    },

    async getSchedule(scheduleId: string): Promise<Schedule | null> {
      const [row] = await read<Parameters<typeof scheduleFromDb>[0]>({ ...SCHEDULE_BY_ID, values: [scheduleId] });
      return row ? scheduleFromDb(row) : null;
    },

    async listSchedules(filter: ScheduleFilter): Promise<Schedule[]> {
      const rows = await read<Parameters<typeof scheduleFromDb>[0]>(listSchedulesSql(filter));
      return rows.map(scheduleFromDb);
    },
  };
}
