/** Events sent to runs and published by key (DESIGN §11.2–11.3). */
import type { InboxEvent } from "../core/types.js";

/**
 * The inbox, inside a write transaction: reads take no lock (the run's lock guards its inbox);
 * DatabaseError on a failure of the database. The inbox is never loaded whole (DESIGN §13.1).
 */
export interface InboxTx {
  /** The run's oldest events of this name no wait_event took yet, oldest first, at most `limit` (index on (run_id, name)). */
  waitingEvents(runId: string, name: string, limit: number): Promise<InboxEvent[]>;
  /** How many events the run's inbox holds (no wait_event took them yet) and their payloads' bytes. */
  inboxSize(runId: string): Promise<{ events: number; bytes: number }>;
  /** Events published by key (name, key) at `since` or later, oldest first. */
  keyedEvents(name: string, key: string, since: number): Promise<InboxEvent[]>;
  /** The event under this idempotency key, sent to `scope.run_id` or (run_id null) published by (`scope.name`, `scope.key`). */
  inboxByIdempotencyKey(
    scope: { run_id: string } | { run_id: null; name: string; key: string },
    idempotencyKey: string,
  ): Promise<InboxEvent | null>;
  /** Inserts new rows and records deliveries (by event_id). Idempotent. */
  writeInbox(rows: InboxEvent[]): Promise<void>;
  /** Deletes events by key published before `before` (no buffer keeps them longer). Idempotent. */
  pruneKeyed(before: number): Promise<void>;
}
