/** The workflows table on SQLite: definitions written in the store's transactions, read on the read connection. */
import type Database from "better-sqlite3";
import type { StoredWorkflow, WorkflowStore } from "../workflows.js";
import type { Read } from "./reads.js";

/** The workflows whose latest version declares a trigger on the event (a version's rows are written with it). */
const TRIGGERED_BY = `SELECT t.workflow_id AS id, t.version FROM workflow_triggers t
  WHERE t.event = ? AND t.version = (SELECT max(w.version) FROM workflows w WHERE w.id = t.workflow_id)
  ORDER BY t.workflow_id`;

/** `inTransaction`: runs its function in a write transaction of the store (SqliteStore.transaction). */
export function sqliteWorkflows(
  db: Database.Database,
  read: Read,
  inTransaction: <T>(fn: () => T) => Promise<T>,
): WorkflowStore {
  const s = {
    byHash: db.prepare("SELECT version FROM workflows WHERE id = ? AND hash = ?"),
    latest: db.prepare("SELECT max(version) AS latest FROM workflows WHERE id = ?"),
    insert: db.prepare("INSERT INTO workflows (id, version, hash, definition, created_at) VALUES (?, ?, ?, ?, ?)"),
    insertTrigger: db.prepare("INSERT INTO workflow_triggers (event, workflow_id, version) VALUES (?, ?, ?)"),
    insertOrIgnore: db.prepare(
      "INSERT OR IGNORE INTO workflows (id, version, hash, definition, created_at) VALUES (?, ?, ?, ?, ?)",
    ),
  };
  return {
    putWorkflow: (id, hash, definition, now, events = []) =>
      inTransaction(() => {
        const same = s.byHash.get(id, hash) as { version: number } | undefined;
        if (same) return { version: same.version, created: false };
        const { latest } = s.latest.get(id) as { latest: number | null };
        const version = (latest ?? 0) + 1;
        const stored = JSON.stringify({ ...JSON.parse(definition), version });
        s.insert.run(id, version, hash, stored, now);
        for (const event of events) s.insertTrigger.run(event, id, version);
        return { version, created: true };
      }),
    putWorkflowVersion: async (id, version, hash, definition, now) => {
      await inTransaction(() => {
        s.insertOrIgnore.run(id, version, hash, definition, now);
      });
    },
    getWorkflow: async (id, version) => {
      const row =
        version === undefined
          ? read("SELECT * FROM workflows WHERE id = ? ORDER BY version DESC LIMIT 1").get(id)
          : read("SELECT * FROM workflows WHERE id = ? AND version = ?").get(id, version);
      return (row as StoredWorkflow | undefined) ?? null;
    },
    latestWorkflowVersion: async (id) => {
      const row = read("SELECT max(version) AS version FROM workflows WHERE id = ?").get(id) as {
        version: number | null;
      };
      return row.version;
    },
    listWorkflows: async () =>
      read(
        "SELECT id, max(version) AS version, max(created_at) AS created_at FROM workflows WHERE instr(id, '/') = 0 GROUP BY id ORDER BY id",
      ).all() as { id: string; version: number; created_at: number }[],
    workflowsTriggeredBy: async (event) => read(TRIGGERED_BY).all(event) as { id: string; version: number }[],
  };
}
