/**
 * The local Redis that BullMQ runs on: started the way the machine starts it if it does not
 * answer, and each system's keys (under a prefix of its own) deleted when it is done.
 *
 * The server is the machine's redis-server with no persistence at all (`--save ""`, no AOF):
 * what BullMQ holds lives in Redis's memory only, which the report says (systems/bullmq.ts
 * `settings`). ioredis is BullMQ's own client, listed in bench/peers/package.json; it is
 * imported inside each function because run.ts imports this file before it has installed the
 * peers (a fresh checkout has no bench/peers/node_modules yet).
 */
import { spawnSync } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";

/** The command the machine starts Redis with (no snapshots, no append-only file). */
const REDIS_SERVER_ARGS = [
  "--daemonize",
  "yes",
  "--bind",
  "127.0.0.1",
  "-::1",
  "--port",
  "6379",
  "--save",
  "",
  "--appendonly",
  "no",
  "--dir",
  "/var/lib/redis",
  "--logfile",
  "/var/log/redis/ci.log",
];
/** How long a started server may take to answer PING. */
const START_TIMEOUT_MS = 10_000;
/** Keys per SCAN page and per UNLINK. */
const BATCH = 1000;

/** A client that fails at once when the server is not there (ioredis would retry forever). */
async function connect(url: string): Promise<Redis> {
  const { Redis } = await import("ioredis");
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  // Connection errors reach the caller through connect()/ping(); no unhandled "error" event.
  client.on("error", () => {});
  await client.connect();
  return client;
}

async function answers(url: string): Promise<boolean> {
  let client: Redis | null = null;
  try {
    client = await connect(url);
    return (await client.ping()) === "PONG";
  } catch {
    return false;
  } finally {
    client?.disconnect();
  }
}

/** Resolves once the Redis at `url` answers PING, starting the local server first if it does not. */
export async function ensureRedis(url: string): Promise<void> {
  if (await answers(url)) return;
  process.stderr.write(
    `redis: ${url} does not answer PING; starting redis-server ${REDIS_SERVER_ARGS.map((a) => a || '""').join(" ")}\n`,
  );
  const r = spawnSync("redis-server", REDIS_SERVER_ARGS, { encoding: "utf8" });
  if (r.error) throw new Error(`redis: cannot run redis-server: ${r.error.message}`);
  if (r.status !== 0) {
    throw new Error(`redis: redis-server exited with ${r.status}: ${(r.stderr || r.stdout).trim()}`);
  }
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (await answers(url)) return;
    await sleep(100);
  }
  throw new Error(
    `redis: started redis-server, but ${url} still does not answer PING after ${START_TIMEOUT_MS / 1000} s (see /var/log/redis/ci.log)`,
  );
}

/**
 * Deletes every key under `prefix`: BullMQ names its keys `<prefix>:<queue>:…`, so the match is
 * `<prefix>:*` (a sibling prefix that merely starts the same, e.g. `…-bullmq_w5` beside
 * `…-bullmq`, is left alone). SCAN pages, each page's keys UNLINKed (freed in the background).
 */
export async function clearPrefix(url: string, prefix: string): Promise<void> {
  const client = await connect(url);
  try {
    // SCAN MATCH is a glob: escape its special characters in the prefix.
    const match = `${prefix.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}:*`;
    let cursor = "0";
    do {
      const [next, keys] = await client.scan(cursor, "MATCH", match, "COUNT", BATCH);
      if (keys.length > 0) await client.unlink(...keys);
      cursor = next;
    } while (cursor !== "0");
  } finally {
    client.disconnect();
  }
}
