/**
 * The two Redis servers BullMQ runs on, and each system's keys (under a prefix of its own)
 * deleted when it is done.
 *
 * - `bullmq`: the machine's redis-server on 6379 with no persistence at all (`--save ""`, no
 *   AOF), started the way the machine starts it if it does not answer: what BullMQ holds lives
 *   in Redis's memory only.
 * - `bullmq-aof`: a redis-server of the bench's own (`startAofRedis`), a child process on a free
 *   port with an append-only file fsynced once a second (`--appendonly yes --appendfsync
 *   everysec`, no snapshots) in a fresh temporary directory: the durability closest to SQLite's
 *   synchronous=normal (a crashed process loses nothing, a power cut the last second or so).
 *   run.ts stops it and removes its directory when the bench ends.
 *
 * The report reads each server's persistence from the server itself (systems/bullmq.ts
 * `settings`). ioredis is BullMQ's own client, listed in bench/peers/package.json; it is
 * imported inside each function because run.ts imports this file before it has installed the
 * peers (a fresh checkout has no bench/peers/node_modules yet).
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
/**
 * The AOF server's persistence: every write appended to a file, the file fsynced once a second
 * by a background thread, no RDB snapshots (the AOF is the only copy), not daemonized (a child
 * of the bench, which stops it).
 */
const AOF_ARGS = ["--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--daemonize", "no"];
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

/** A port nothing listens on now: the kernel's pick for port 0 (6380 may be another run's). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

export interface AofRedis {
  url: string;
  /** Stops the server (SIGTERM, SIGKILL after 5 s) and removes its directory. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Starts the bench's own Redis with an append-only file (AOF_ARGS) on a free port, in a fresh
 * directory under the temporary directory, and resolves once it answers PING. The caller stops
 * it; if the bench ends without doing so (process.exit, an uncaught error, SIGINT or SIGTERM),
 * a hook kills it and removes the directory all the same.
 */
export async function startAofRedis(): Promise<AofRedis> {
  const dir = mkdtempSync(join(process.env.BENCH_TMPDIR ?? tmpdir(), "skein-peers-redis-aof-"));
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  const log = join(dir, "redis.log");
  const args = ["--bind", "127.0.0.1", "--port", String(port), "--dir", dir, "--logfile", log, ...AOF_ARGS];
  process.stderr.write(`redis: starting redis-server ${args.map((a) => a || '""').join(" ")}\n`);
  const proc = spawn("redis-server", args, { stdio: "ignore" });
  /** Why the server is gone, once it is (a spawn error or its exit). */
  let gone: string | null = null;
  const exited = new Promise<void>((resolve) =>
    proc.once("close", (code, signal) => {
      gone ??= `exited (${code ?? signal})`;
      resolve();
    }),
  );
  proc.once("error", (e) => {
    gone = e.message;
  });

  // The last resort: synchronous, since an "exit" listener cannot wait.
  const kill = () => {
    proc.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  const onSignal = (signal: NodeJS.Signals) => {
    kill();
    process.kill(process.pid, signal); // the listener is gone (once): the default action follows
  };
  process.once("exit", kill);
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    process.off("exit", kill);
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    if (gone === null) {
      proc.kill("SIGTERM"); // Redis fsyncs the AOF and exits
      if (await Promise.race([exited.then(() => false), sleep(5000).then(() => true)])) {
        proc.kill("SIGKILL");
        await exited;
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + START_TIMEOUT_MS;
  while (gone === null && Date.now() < deadline) {
    if (await answers(url)) return { url, stop };
    await sleep(100);
  }
  const why = gone ?? `no answer to PING after ${START_TIMEOUT_MS / 1000} s`;
  let logTail = "";
  try {
    logTail = readFileSync(log, "utf8").trim().split("\n").slice(-5).join("\n");
  } catch {
    // No log: redis-server did not get that far.
  }
  await stop();
  throw new Error(`redis: the AOF server on ${url} did not start: ${why}${logTail ? `\n${logTail}` : ""}`);
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
