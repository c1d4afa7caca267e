/**
 * WAL checkpoints copy the log back into the database file and sync it: tens to hundreds of
 * milliseconds on a busy disk. They run on a worker thread with a connection of its own, so the
 * engine's thread never stalls on one (in WAL mode a checkpoint runs beside the writer).
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type { Logger } from "pino";

// Plain CommonJS so the worker needs no TypeScript loader.
const WORKER = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.module);
const db = new Database(workerData.path);
parentPort.on("message", () => {
  try {
    db.pragma("wal_checkpoint(PASSIVE)");
    parentPort.postMessage(null);
  } catch (e) {
    parentPort.postMessage(String(e && e.message));
  }
});
`;

export class Checkpointer {
  private readonly worker: Worker;
  private running = false;

  constructor(path: string, logger?: Pick<Logger, "warn">) {
    const module = createRequire(import.meta.url).resolve("better-sqlite3");
    this.worker = new Worker(WORKER, { eval: true, workerData: { path, module } });
    this.worker.unref();
    this.worker.on("message", (error: string | null) => {
      this.running = false;
      if (error) logger?.warn({ error }, "skein: WAL checkpoint failed; the next one will retry");
    });
    this.worker.on("error", (err) => logger?.warn({ err }, "skein: the checkpoint thread stopped"));
  }

  /** Starts a checkpoint unless one is running. */
  request(): void {
    if (this.running) return;
    this.running = true;
    this.worker.postMessage(null);
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}
