/** The systems of the peers bench, in the order of the report's tables. */
import type { SystemName } from "./system.js";

export interface SystemInfo {
  name: SystemName;
  /** Shown in the tables; the peers' versions are added from their installed package.json. */
  label: string;
  store: "sqlite" | "postgres" | "redis";
  skein: boolean;
  /** W6: the system implements System.fanOut. */
  fanOut: boolean;
  /** The package whose installed version the report records. */
  package?: string;
  /** Redis systems: the bench's own server with an append-only file, not the in-memory one (redis.ts). */
  redisAof?: boolean;
}

export const SYSTEMS: SystemInfo[] = [
  { name: "skein-sqlite", label: "Skein, SQLite normal", store: "sqlite", skein: true, fanOut: true },
  { name: "skein-sqlite-full", label: "Skein, SQLite full", store: "sqlite", skein: true, fanOut: true },
  { name: "skein-pg", label: "Skein, PostgreSQL", store: "postgres", skein: true, fanOut: true },
  { name: "dbos", label: "DBOS", store: "postgres", skein: false, fanOut: true, package: "@dbos-inc/dbos-sdk" },
  {
    name: "langgraph",
    label: "LangGraph",
    store: "sqlite",
    skein: false,
    fanOut: true,
    package: "@langchain/langgraph",
  },
  {
    name: "graphile-worker",
    label: "graphile-worker",
    store: "postgres",
    skein: false,
    fanOut: false,
    package: "graphile-worker",
  },
  { name: "pg-boss", label: "pg-boss", store: "postgres", skein: false, fanOut: false, package: "pg-boss" },
  { name: "mastra", label: "Mastra", store: "sqlite", skein: false, fanOut: true, package: "@mastra/core" },
  { name: "bullmq", label: "BullMQ", store: "redis", skein: false, fanOut: true, package: "bullmq" },
  // The same code on a Redis that persists like SQLite's synchronous=normal: what durability costs BullMQ.
  {
    name: "bullmq-aof",
    label: "BullMQ, Redis AOF everysec",
    store: "redis",
    skein: false,
    fanOut: true,
    package: "bullmq",
    redisAof: true,
  },
];
