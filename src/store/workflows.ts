/** Registered workflow definitions, by id and version. */

export interface StoredWorkflow {
  id: string;
  version: number;
  hash: string;
  /** The definition as registered (JSON text), with its version. */
  definition: string;
  created_at: number;
}

/** Workflow definitions, outside the caller's transactions; DatabaseError on a failure of the database. */
export interface WorkflowStore {
  /**
   * Stores the definition under the next version unless one with the same hash exists, with the
   * event names its triggers declare (`workflowsTriggeredBy`), in one transaction. Idempotent
   * (serialised per id).
   */
  putWorkflow(
    id: string,
    hash: string,
    definition: string,
    now: number,
    events?: readonly string[],
  ): Promise<{ version: number; created: boolean }>;
  /** Stores the definition under the caller's version unless it exists (a map's item workflow, at its parent's). Idempotent. */
  putWorkflowVersion(id: string, version: number, hash: string, definition: string, now: number): Promise<void>;
  /** The given version, or the latest, or null. Reads only. */
  getWorkflow(id: string, version?: number): Promise<StoredWorkflow | null>;
  /** The latest version's number without its definition (cached by version), or null. Reads only. */
  latestWorkflowVersion(id: string): Promise<number | null>;
  /** Workflows by id with their latest version; not map nodes' item workflows (their ids hold a `/`). Reads only. */
  listWorkflows(): Promise<{ id: string; version: number; created_at: number }[]>;
  /** The workflows whose latest version's triggers declare `event` (DESIGN §17), by id, with that version. Reads only. */
  workflowsTriggeredBy(event: string): Promise<{ id: string; version: number }[]>;
}
