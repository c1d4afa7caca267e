/**
 * The one interface the peers bench drives: Skein (each store) and every peer implement it in
 * a file of their own, written the way that system's documentation shows. A system lives in a
 * child process of its own (child.ts) and its steps call steps.ts `work`.
 */
import type { Shape } from "../shapes.js";

export interface System {
  /** Opens the system on its database and makes every shape runnable. May follow a close(). */
  open(): Promise<void>;
  /** Closes it and every connection it holds (a PostgreSQL backend flushes its statistics when it ends). */
  close(): Promise<void>;
  /** Starts one run of `shape` and resolves when the system reports it done; rejects if it failed. */
  run(shape: Shape): Promise<void>;
  /** W5: starts runs of `shape` (named `keys` where the system lets the caller name runs) without waiting; returns the runs' keys as steps see them. */
  startMany(shape: Shape, keys: string[]): Promise<string[]>;
  /** W5, before open(): the steps of these runs whose completion the database holds, as "<run key> <node_id>". */
  committedSteps(keys: string[]): Promise<string[]>;
  /**
   * W5, instead of open() in the restarted process: opens the system and resolves once each of
   * these runs is done (calling `onDone` once for each), resuming them first if the system needs
   * to be told.
   */
  resume(shape: Shape, keys: string[], onDone: (key: string) => void): Promise<void>;
  /**
   * W6, dynamic fan-out: one run whose first step ("plan") returns a list of `n` items, each
   * processed by a no-op step ("item") with at most `concurrency` of them at a time, then one step
   * ("join") that receives their outputs. Written with the system's own idiom for a list known
   * only at run time. Resolves when the join is done. Absent where the system has no such idiom.
   */
  fanOut?(n: number, concurrency: number): Promise<void>;
  /** SQLite systems: total_changes() of the connection that writes (rows inserted, updated or deleted since it opened). */
  sqliteChanges?(): number;
  /** The settings the numbers depend on (durability, concurrency, polling), for the report. */
  settings(): Record<string, unknown>;
}

/** Where a system keeps its data: a SQLite file, or a PostgreSQL database of its own. */
export interface SystemConfig {
  sqlitePath?: string;
  pgUrl?: string;
  /** Redis systems (BullMQ): the server's URL and a key prefix of this process's own. */
  redisUrl?: string;
  redisPrefix?: string;
}

export type SystemName =
  | "skein-sqlite"
  | "skein-sqlite-full"
  | "skein-pg"
  | "dbos"
  | "langgraph"
  | "graphile-worker"
  | "pg-boss"
  | "mastra"
  | "bullmq"
  | "bullmq-aof";

/** What child.ts is started with (run.ts builds it). */
export interface ChildConfig extends SystemConfig {
  system: SystemName;
  /** The PostgreSQL database's name (W1 counts its commits). */
  database?: string;
  /** W5: the file each step appends its side effect to. */
  effectFile?: string;
  /** W5, restart: the runs to resume. */
  keys?: string[];
}
