/**
 * Clocks (DESIGN §7, issue 14 item 5): on PostgreSQL every due time comes from the database's
 * clock, so an engine whose machine clock is 5 minutes behind (or ahead) starts runs with the
 * TTL they should have. Real engine processes run under libfaketime (Debian's `faketime`,
 * installed here with apt-get when missing): only the wall clock is faked, not the monotonic
 * one libuv's timers use, as on a machine whose clock is set wrong.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, createEngine, type Engine, type Run, type RunWithNodes } from "../../src/index.js";
import { Child, type Message, within } from "../fixtures/child.js";
import { PG_URL } from "../helpers.js";

const CHILD = fileURLToPath(new URL("../fixtures/skewed-engine.ts", import.meta.url));
const LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const TTL_S = 60;
const RUNS = 10;

/** Installs libfaketime when missing (the test machine is Debian and the tests run as root). */
function ensureFaketime(): void {
  if (existsSync(LIBFAKETIME)) return;
  try {
    execFileSync("apt-get", ["install", "-y", "faketime"], { stdio: "ignore" });
  } catch (e) {
    throw new Error(`this test needs libfaketime: apt-get install -y faketime failed (${(e as Error).message})`);
  }
  if (!existsSync(LIBFAKETIME)) throw new Error(`apt-get installed faketime but ${LIBFAKETIME} is missing`);
}

const schema = `skein_skew_${randomBytes(4).toString("hex")}`;
const url = `${PG_URL}?schema=${schema}`;
const admin = new pg.Client({ connectionString: PG_URL });
let client: Engine;
const children: Child[] = [];

beforeAll(async () => {
  ensureFaketime();
  await admin.connect();
  client = await createClient({ database: url });
  await client.registerWorkflow({
    id: "skew",
    timeout: TTL_S,
    nodes: [
      { node_id: "a", agent_type: "work" },
      { node_id: "b", agent_type: "work", depends_on: ["a"] },
    ],
  });
});

afterAll(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
  await client?.close();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
});

async function dbNow(): Promise<number> {
  const { rows } = await admin.query("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now");
  return Number((rows[0] as { now: string }).now);
}

/** An engine process whose wall clock is `offset` (libfaketime syntax: "-5m", "+5m") off. */
function skewedEngine(offset: string, mode: "engine" | "client" = "engine"): Child {
  const child = new Child(CHILD, [url, "skew", String(RUNS), mode], {
    LD_PRELOAD: LIBFAKETIME,
    FAKETIME: offset,
    FAKETIME_DONT_FAKE_MONOTONIC: "1",
  });
  children.push(child);
  return child;
}

describe("engines with skewed clocks on PostgreSQL", () => {
  it.each(["-5m", "+5m"])(
    "an engine %s off starts runs whose TTL is the database's time at start + TTL",
    async (offset) => {
      const before = await dbNow();
      const child = skewedEngine(offset);
      const clock = await child.waitFor("its clock", (m) => m.type === "clock");
      // The fake clock is in effect: the child's time is about 5 minutes off the database's.
      const skew = (clock.now as number) - before;
      expect(Math.abs(Math.abs(skew) - 300_000)).toBeLessThan(60_000);
      expect(Math.sign(skew)).toBe(offset.startsWith("-") ? -1 : 1);

      const done: Message = await within(
        60_000,
        "the end of the runs",
        child.waitFor("done", (m) => m.type === "done"),
      );
      const after = await dbNow();
      const runs = done.runs as RunWithNodes[];
      expect(runs).toHaveLength(RUNS);
      for (const run of runs) {
        expect(run.status, JSON.stringify(run.error)).toBe("SUCCEEDED");
        // Database time at start (the run.started event's transaction) + TTL.
        const [startedEvent] = (await client.listEvents(run.run_id)).filter((e) => e.type === "run.started");
        const startedAt = startedEvent?.at as number;
        expect(startedAt).toBeGreaterThanOrEqual(before);
        expect(startedAt).toBeLessThanOrEqual(after);
        expect(Math.abs(run.deadline_at - (startedAt + TTL_S * 1000))).toBeLessThan(1000);
        expect(run.created_at).toBeGreaterThanOrEqual(before);
        expect(run.created_at).toBeLessThanOrEqual(after);
        // Attempts were judged by the database's clock too.
        for (const n of run.nodes) {
          expect(n.started_at).toBeGreaterThanOrEqual(before);
          expect(n.started_at).toBeLessThanOrEqual(after);
        }
      }
    },
    90_000,
  );

  it("an engine 5 min behind and one 5 min ahead serve side by side: all succeed, neither takes the other for dead", async () => {
    const engines = [skewedEngine("-5m"), skewedEngine("+5m")];
    const done = await within(
      60_000,
      "the end of both engines' runs",
      Promise.all(engines.map((c) => c.waitFor("done", (m) => m.type === "done"))),
    );
    const runs = done.flatMap((m) => m.runs as Run[]);
    expect(runs).toHaveLength(2 * RUNS);
    for (const run of runs) {
      expect(run.status, JSON.stringify(run.error)).toBe("SUCCEEDED");
      const events = await client.listEvents(run.run_id);
      // A heartbeat judged by the engine's own clock would make the other look 5 min dead.
      expect(events.filter((e) => e.type === "node.interrupted")).toEqual([]);
      for (const n of (await client.getRun(run.run_id)).nodes) expect(n.attempt).toBe(1);
    }
  }, 90_000);

  it("a client 5 min behind (as `skein start`) starts runs with the database's TTL; an engine runs them", async () => {
    const before = await dbNow();
    const child = skewedEngine("-5m", "client");
    const started = (await child.waitFor("its runs", (m) => m.type === "started")).runs as Run[];
    const after = await dbNow();
    const engine = await createEngine({ database: url, agents: { work: () => ({ ok: true }) } });
    try {
      for (const run of started) {
        expect(run.deadline_at).toBeGreaterThanOrEqual(before + TTL_S * 1000);
        expect(run.deadline_at).toBeLessThanOrEqual(after + TTL_S * 1000);
        expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
      }
    } finally {
      await engine.close();
    }
  }, 90_000);
});
