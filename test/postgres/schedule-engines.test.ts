/**
 * Schedules across engines (DESIGN §11.5, issue 20): three engine processes on one PostgreSQL
 * schema fire an every-second schedule for 100 slots while one of them at a time is SIGKILLed
 * and started again at random moments (the seed is printed; SCHEDULE_SEED replays it). Every
 * slot from the first to the last handled has exactly one run, and every run succeeds: no slot
 * is lost to a crash between firing and commit, none is fired twice by two engines. Slots are
 * judged by the database's clock, so the engines' own clocks do not matter.
 */
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, type Engine, type Run } from "../../src/index.js";
import { Child, within } from "../fixtures/child.js";
import { PG_URL } from "../helpers.js";

const ENGINE = fileURLToPath(new URL("../fixtures/schedule-engine.ts", import.meta.url));
const SLOTS = 100;
const SECOND = 1000;

const schema = `skein_sched_${randomBytes(4).toString("hex")}`;
const url = `${PG_URL}?schema=${schema}`;
const seed = Number(process.env.SCHEDULE_SEED ?? Math.floor(Math.random() * 2 ** 31));
let client: Engine;
const engines: Child[] = [];

/** A small seeded generator (mulberry32): the kills' order and pauses replay from the seed. */
function random(s: number): () => number {
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Real time passing, for the chaos's pace only (what the test checks is waited for by polling, bounded). */
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function startEngine(): Promise<Child> {
  const child = new Child(ENGINE, [url]);
  await child.waitFor("ready", (m) => m.type === "ready");
  return child;
}

/** Polls `check` every 200 ms until it holds, at most `ms`. */
async function until(ms: number, what: string, check: () => Promise<boolean>): Promise<void> {
  await within(
    ms,
    what,
    (async () => {
      while (!(await check())) await pause(200);
    })(),
  );
}

beforeAll(async () => {
  client = await createClient({ database: url });
  await client.registerWorkflow({ id: "tick", nodes: [{ node_id: "a", agent_type: "work" }] });
});

afterAll(async () => {
  await Promise.all(engines.splice(0).map((c) => c.kill()));
  await client?.close();
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
});

describe("a schedule on three engines with random SIGKILLs", () => {
  it(`fires each of ${SLOTS} slots exactly once (seed ${seed})`, async () => {
    process.stdout.write(`schedule-engines: seed ${seed}\n`);
    const rand = random(seed);
    engines.push(...(await Promise.all([startEngine(), startEngine(), startEngine()])));
    const { schedule } = await client.putSchedule({
      schedule_id: "tick",
      workflow_id: "tick",
      cron: "* * * * * *",
      // Every slot gets a run, late or not: a slot lost to a crash would show as a gap.
      catchup: "all",
      catchup_limit: 1000,
      overlap: "allow",
    });
    const first = schedule.next_fire_at as number;
    const last = first + (SLOTS - 1) * SECOND;
    let kills = 0;
    const chaos = (async () => {
      for (;;) {
        await pause(1000 + Math.floor(rand() * 3000));
        const s = await client.getSchedule("tick");
        if ((s.last_slot_at ?? 0) >= last) return;
        const i = Math.floor(rand() * engines.length);
        await engines[i]?.kill();
        kills += 1;
        engines[i] = await startEngine();
      }
    })();
    await within(SLOTS * SECOND + 60_000, "the chaos's end", chaos);
    await until(30_000, `slot ${new Date(last).toISOString()} handled`, async () => {
      return ((await client.getSchedule("tick")).last_slot_at ?? 0) >= last;
    });
    const stopped = await client.pauseSchedule("tick");
    const end = stopped.last_slot_at as number;
    await until(60_000, "every run of the schedule ended", async () => {
      return (await client.listRuns({ schedule_id: "tick", status: "RUNNING", limit: 1 })).length === 0;
    });
    expect(kills).toBeGreaterThan(0);
    const runs: Run[] = await client.listRuns({ schedule_id: "tick", limit: 10_000 });
    const slots = runs
      .map((r) => Date.parse((r.idempotency_key ?? "").replace(/^schedule:tick:/, "")))
      .sort((a, b) => a - b);
    const expected = Array.from({ length: (end - first) / SECOND + 1 }, (_, i) => first + i * SECOND);
    expect(expected.length).toBeGreaterThanOrEqual(SLOTS);
    expect(slots).toEqual(expected);
    expect(runs.filter((r) => r.status !== "SUCCEEDED").map((r) => [r.idempotency_key, r.status, r.error])).toEqual([]);
    for (const run of runs) {
      const started = (await client.listEvents(run.run_id)).filter((e) => e.type === "run.started");
      expect(started).toHaveLength(1);
    }
  }, 240_000);
});
