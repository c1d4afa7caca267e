/** The workflows table on PostgreSQL: definitions registered by many processes at once, safely. */
import type pg from "pg";
import type { StoredWorkflow, WorkflowStore } from "../workflows.js";
import type { Read } from "./reads.js";
import { selectList, WORKFLOW_COLUMNS } from "./rows.js";
import type { Session } from "./session.js";

/** First key of workflow registration locks ("skwf"); the second is a hash of schema and id. */
const WORKFLOW_LOCK = 0x736b7766;

const WORKFLOWS = selectList(WORKFLOW_COLUMNS);

/**
 * `read`: one statement outside a transaction; `inTransaction`: a transaction of the store's
 * own (PostgresStore.inTransaction); `schemaSql`: the schema's quoted name (it keys the lock).
 */
export function postgresWorkflows(
  read: Read,
  inTransaction: <T>(fn: (session: Session, begun: pg.QueryResult[]) => Promise<T>) => Promise<T>,
  schemaSql: string,
): WorkflowStore {
  return {
    async putWorkflow(id: string, hash: string, definition: string, now: number, events: readonly string[] = []) {
      const [known] = await read<{ version: number }>({
        name: "skein_workflow_by_hash",
        text: "SELECT version FROM workflows WHERE id = $1 AND hash = $2",
        values: [id, hash],
      });
      if (known) return { version: known.version, created: false };
      // Two processes registering at once: the lock orders them, and the second finds the first's version.
      return inTransaction(async (session) => {
        await session.query({
          text: "SELECT pg_advisory_xact_lock($1, hashtext($2))",
          values: [WORKFLOW_LOCK, `${schemaSql}.${id}`],
        });
        const { rows } = await session.query<{ same: number | null; latest: number | null }>({
          text: `SELECT (SELECT version FROM workflows WHERE id = $1 AND hash = $2) AS same,
                        (SELECT max(version) FROM workflows WHERE id = $1) AS latest`,
          values: [id, hash],
        });
        const same = rows[0]?.same ?? null;
        if (same !== null) return { version: same, created: false };
        const version = (rows[0]?.latest ?? 0) + 1;
        const stored = JSON.stringify({ ...JSON.parse(definition), version });
        const inserted = await session.query({
          text: `INSERT INTO workflows (id, version, hash, definition, created_at) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT DO NOTHING`,
          values: [id, version, hash, stored, now],
        });
        if (inserted.rowCount === 1) {
          if (events.length > 0) {
            await session.query({
              text: "INSERT INTO workflow_triggers (event, workflow_id, version) SELECT unnest($1::text[]), $2, $3",
              values: [events, id, version],
            });
          }
          return { version, created: true };
        }
        const again = await session.query<{ version: number }>({
          text: "SELECT version FROM workflows WHERE id = $1 AND hash = $2",
          values: [id, hash],
        });
        const found = again.rows[0];
        if (!found) throw new Error(`skein: workflow ${id} version ${version} was taken by another definition`);
        return { version: found.version, created: false };
      });
    },

    async getWorkflow(id: string, version?: number): Promise<StoredWorkflow | null> {
      const [row] =
        version === undefined
          ? await read<StoredWorkflow>({
              name: "skein_latest_workflow",
              text: `SELECT ${WORKFLOWS} FROM workflows WHERE id = $1 ORDER BY version DESC LIMIT 1`,
              values: [id],
            })
          : await read<StoredWorkflow>({
              name: "skein_workflow",
              text: `SELECT ${WORKFLOWS} FROM workflows WHERE id = $1 AND version = $2`,
              values: [id, version],
            });
      return row ?? null;
    },

    async latestWorkflowVersion(id: string): Promise<number | null> {
      const [row] = await read<{ version: number | null }>({
        name: "skein_latest_workflow_version",
        text: "SELECT max(version) AS version FROM workflows WHERE id = $1",
        values: [id],
      });
      return row?.version ?? null;
    },

    async putWorkflowVersion(id: string, version: number, hash: string, definition: string, now: number) {
      await inTransaction(async (session) => {
        await session.query({
          text: `INSERT INTO workflows (id, version, hash, definition, created_at) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT DO NOTHING`,
          values: [id, version, hash, definition, now],
        });
      });
    },

    async listWorkflows(): Promise<{ id: string; version: number; created_at: number }[]> {
      return read({
        text: "SELECT id, max(version) AS version, max(created_at) AS created_at FROM workflows WHERE strpos(id, '/') = 0 GROUP BY id ORDER BY id",
      });
    },

    async workflowsTriggeredBy(event: string): Promise<{ id: string; version: number }[]> {
      return read({
        name: "skein_workflows_triggered_by",
        text: `SELECT t.workflow_id AS id, t.version FROM workflow_triggers t
                 WHERE t.event = $1 AND t.version = (SELECT max(w.version) FROM workflows w WHERE w.id = t.workflow_id)
                 ORDER BY t.workflow_id`,
        values: [event],
      });
    },
  };
}
