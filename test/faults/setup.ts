/**
 * What the fault cases share: the seed (every random choice comes from it; FAULT_SEED replays a
 * case), engine and worker processes, bounded polling of the database, and fresh databases.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterEach } from "vitest";
import { Child } from "../fixtures/child.js";
import { PG_URL } from "../helpers.js";
import { withDatabase } from "./read-db.js";

export { PG_URL };

export const ENGINE = fileURLToPath(new URL("../fixtures/fault-engine.mjs", import.meta.url));
export const AGENTS = fileURLToPath(new URL("../fixtures/fault-agents.mjs", import.meta.url));
export const CLI = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));

/** A seeded generator (mulberry32): the same seed, the same choices. */
export class Rng {
  private state: number;
  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }
  pick<T>(list: readonly T[]): T {
    return list[Math.floor(this.next() * list.length)] as T;
  }
}

/** The case's seed: FAULT_SEED if set, else a new one (printed in the case's line). */
export function caseRng(): Rng {
  const fixed = process.env.FAULT_SEED;
  return new Rng(fixed ? Number(fixed) : randomBytes(4).readUInt32LE(0));
}

const children: Child[] = [];
const dirs: string[] = [];
const schemas: string[] = [];
const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const c of children) if (c.alive) c.proc.kill("SIGCONT"); // lets a stopped process be reaped at once
  await Promise.all(children.splice(0).map((c) => c.kill()));
  for (const fn of cleanups.splice(0).reverse()) await fn();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  if (schemas.length > 0) {
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      for (const s of schemas.splice(0)) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    } finally {
      await admin.end();
    }
  }
});

/** Runs `fn` after the test (before its directories and schemas go). */
export function onCleanup(fn: () => Promise<void> | void): void {
  cleanups.push(fn);
}

export function faultDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "skein-fault-"));
  dirs.push(dir);
  return dir;
}

/** A fresh PostgreSQL schema's URL; `app` names its connections (pg_stat_activity.application_name). */
export function pgDatabase(app?: string): { url: string; schema: string } {
  const schema = `skein_f_${randomBytes(5).toString("hex")}`;
  schemas.push(schema);
  const url = `${PG_URL}?schema=${schema}${app ? `&application_name=${app}` : ""}`;
  return { url, schema };
}

/**
 * An engine process (test/fixtures/fault-engine.mjs); killed after the test. Its agents' waits
 * come from `rng` (one draw per process).
 */
export function engineProcess(rng: Rng, config: Record<string, unknown>, env: Record<string, string> = {}): Child {
  const child = new Child(ENGINE, [JSON.stringify({ seed: rng.int(0, 2 ** 31), ...config })], env);
  children.push(child);
  return child;
}

/** A `skein worker` process serving the fault agents (built CLI). */
export function workerProcess(
  rng: Rng,
  server: string,
  token: string,
  workerId: string,
  sink: string,
  args: string[],
): Child {
  const child = new Child(
    CLI,
    ["worker", "--server", server, "--token", token, "--agents", AGENTS, "--worker-id", workerId, ...args],
    { FAULT_SINK: sink, FAULT_WORKER: workerId, FAULT_AGENT_SEED: String(rng.int(0, 2 ** 31)) },
  );
  children.push(child);
  return child;
}

/**
 * Polls `check` every 100 ms until it returns a value (not undefined), at most `ms`; else throws
 * `what`, followed by what `explain` says of the state it found (so a failure in CI can be read
 * without replaying it).
 */
export async function pollUntil<T>(
  what: string,
  ms: number,
  check: () => Promise<T | undefined> | T | undefined,
  explain?: () => Promise<string>,
): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > until) {
      const why = explain ? `\n${await explain().catch((e: unknown) => `(explaining failed: ${String(e)})`)}` : "";
      throw new Error(`${what}: not within ${ms} ms${why}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Why runs are not final, for a failed case: the seed, each engine process's state and last
 * stderr lines, and the first unfinished runs with their visits (state, attempt, holder, and
 * readiness and lease relative to the database's clock).
 */
export async function unfinished(database: string, rng: Rng, engines: readonly Child[] = []): Promise<string> {
  const lines = [`seed ${rng.seed} (FAULT_SEED=${rng.seed} replays the case)`];
  for (const c of engines) {
    const tail = c.errors.trim().split("\n").slice(-3).join(" | ").slice(0, 600);
    lines.push(`engine pid ${c.pid}: ${c.alive ? "alive" : "gone"}${tail ? `; stderr: ${tail}` : ""}`);
  }
  await withDatabase(database, async (query) => {
    const now = Date.now();
    const at = (t: unknown) => (t == null ? "-" : `${Number(t) - now}`);
    const runs = await query(
      "SELECT run_id, workflow_id, status, revision FROM runs WHERE status NOT IN ('SUCCEEDED','FAILED','CANCELLED') ORDER BY run_id LIMIT 5",
    );
    lines.push(
      `${runs.length === 5 ? "the first 5" : runs.length} unfinished runs (ms relative to this process's clock):`,
    );
    for (const r of runs) {
      lines.push(`  ${r.run_id} ${r.workflow_id} ${r.status} revision ${r.revision}`);
      const visits = await query(
        "SELECT node_id, visit, state, attempt, interruptions, failures, holder, ready_at, lease_expires_at, is_current FROM visits WHERE run_id = $1 ORDER BY created_at, node_id, visit",
        [r.run_id],
      );
      for (const v of visits) {
        lines.push(
          `    ${v.node_id}#${v.visit} ${v.state} attempt ${v.attempt} int ${v.interruptions} fail ${v.failures} holder ${v.holder ?? "-"} ready ${at(v.ready_at)} lease ${at(v.lease_expires_at)}${v.is_current ? "" : " (old)"}`,
        );
      }
      const compensations = await query(
        "SELECT seq, node_id, state, attempt, interruptions, failures, holder, ready_at, lease_expires_at FROM compensations WHERE run_id = $1 ORDER BY seq",
        [r.run_id],
      );
      for (const c of compensations) {
        lines.push(
          `    compensation ${c.seq} of ${c.node_id} ${c.state} attempt ${c.attempt} int ${c.interruptions} fail ${c.failures} holder ${c.holder ?? "-"} ready ${at(c.ready_at)} lease ${at(c.lease_expires_at)}`,
        );
      }
    }
    const alive = await query("SELECT engine_id, pid, heartbeat_at, stopped_at FROM engines ORDER BY started_at");
    for (const e of alive) {
      lines.push(
        `engine row ${e.engine_id} pid ${e.pid} heartbeat ${Number(e.heartbeat_at) - now}${e.stopped_at ? " stopped" : ""}`,
      );
    }
  });
  return lines.join("\n");
}

/** The moment of a fault: waits `ms` (never used to wait for an outcome). */
export function faultMoment(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Run ids of the `started` lines a process printed (each an acknowledged start). */
export function acknowledged(children: readonly Child[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const c of children) {
    for (const m of c.messages) if (m.type === "started") out.set(String(m.key), String(m.run_id));
  }
  return out;
}

/** How many runs of a database are final (0 while it is not created yet). */
export async function finalCount(database: string): Promise<number> {
  const sql = "SELECT count(*) AS n FROM runs WHERE status IN ('SUCCEEDED','FAILED','CANCELLED')";
  return withDatabase(database, async (query) => Number((await query(sql))[0]?.n ?? 0)).catch(() => 0);
}

const LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/**
 * The environment that runs a process `offset` off the real clock (libfaketime, e.g. "-5m"),
 * installing Debian's `faketime` first if needed (and saying so). Timers keep the real
 * monotonic clock (libuv's timers would otherwise jump).
 */
export function faketimeEnv(offset: string): Record<string, string> {
  if (!existsSync(LIBFAKETIME)) {
    process.stdout.write("fault suite: installing libfaketime (apt-get install -y faketime)\n");
    execFileSync("apt-get", ["install", "-y", "faketime"], { stdio: "ignore" });
  }
  return { LD_PRELOAD: LIBFAKETIME, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: "1" };
}

/** The database server's clock, epoch ms. */
export async function databaseNow(admin: pg.Client): Promise<number> {
  const { rows } = await admin.query("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now");
  return Number(rows[0].now);
}
