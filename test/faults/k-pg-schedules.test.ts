/**
 * Case k (issue 20; DESIGN §11.5): three engine processes on one PostgreSQL schema fire one
 * schedule every second (`catchup: "all"`, `overlap: "allow"`) while, at random moments, an
 * engine is SIGKILLed and restarted, or (one fault in four) all three are (an outage: the slots
 * that pass are fired late, by catchup, not lost). One engine runs 2 minutes ahead and one 2
 * minutes behind (libfaketime): firing goes by the database's clock, so neither fires a slot
 * early nor fires it twice. Oracle, over the 100 slots of the window (from the cron): each
 * started exactly one run under `skein:schedule:<id>:<slot ISO>`, carrying schedule_id, which
 * SUCCEEDED, its agent's effect done once (beyond attempts in flight at a kill).
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { Cron } from "croner";
import pg from "pg";
import { expect, it } from "vitest";
import { createClient } from "../../src/index.js";
import type { Child } from "../fixtures/child.js";
import { computeOracles, type Expectation, readOutcome } from "./oracles.js";
import {
  caseRng,
  databaseNow,
  engineProcess,
  faketimeEnv,
  faultDir,
  faultMoment,
  PG_URL,
  pgDatabase,
  pollUntil,
} from "./setup.js";
import { readScheduledRuns, slotFigures } from "./slot-oracle.js";
import { TICK } from "./workflows.js";

const SLOTS = 100;
const CRON = "* * * * * *";
const SCHEDULE = "fault-every-second";
/** The engines' clocks: one right, one ahead, one behind; a restarted engine keeps its seat's. */
const SEATS = ["+0", "+2m", "-2m"];
/** A killed engine's attempts are recovered within about 1.3 s; schedules fire at the engine's wake-up. */
const ENGINE = { maxConcurrency: 8, heartbeatIntervalMs: 200, engineTimeoutMs: 1000, sweepIntervalMs: 300 };
/** A slot fired later than this was fired by catchup (an outage), not on time. */
const LATE_MS = 1500;
const strictlySucceeds: Expectation = (run) => (run.status === "SUCCEEDED" ? null : `${run.status}`);

it("k: one schedule fired by 3 engines on PostgreSQL under random SIGKILLs and outages", async () => {
  const rng = caseRng();
  const app = `skein_fk_${randomBytes(3).toString("hex")}`;
  const { url: database } = pgDatabase(app);
  const sink = join(faultDir(), "sink.log");
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  const client = await createClient({ database: database.replace(app, `${app}_client`) });
  try {
    await client.registerWorkflow(TICK);
    const engines: Child[] = [];
    const seatOf = new Map<Child, string>();
    const killed = new Set<number>();
    const spawn = async (seat: string) => {
      const env = seat === "+0" ? {} : faketimeEnv(seat);
      const child = engineProcess(rng, { database, sink, engine: ENGINE }, env);
      engines.push(child);
      seatOf.set(child, seat);
      await child.waitFor("ready", (m) => m.type === "ready");
    };
    await Promise.all(SEATS.map(spawn));
    const skews = engines.map((c) => {
      const ready = c.messages.find((m) => m.type === "ready");
      return Math.round(((ready?.now as number) - Date.now()) / 60_000) || 0; // never -0
    });

    const { schedule } = await client.putSchedule({
      schedule_id: SCHEDULE,
      workflow_id: TICK.id,
      cron: CRON,
      timezone: "UTC",
      overlap: "allow",
      catchup: "all",
    });
    const first = schedule.next_fire_at as number;
    const window = new Cron(CRON, { timezone: "UTC" }).nextRuns(SLOTS, new Date(first - 1)).map((d) => d.getTime());
    const last = window.at(-1) as number;

    // Faults until 2 s before the last slot, at random moments; every fourth (from a random
    // phase) an outage of all three engines.
    let kills = 0;
    let outages = 0;
    const phase = rng.int(0, 3);
    for (let f = 0; (await databaseNow(admin)) < last - 2000; f++) {
      await faultMoment(rng.int(2000, 7000));
      const alive = engines.filter((c) => c.alive && !killed.has(c.pid));
      const victims = f % 4 === phase ? alive : [rng.pick(alive)];
      if (victims.length > 1) outages += 1;
      for (const v of victims) {
        killed.add(v.pid);
        await v.kill();
        kills += 1;
      }
      // An outage lasts a few slots: they pass with no engine up, and catchup must fire them.
      if (victims.length > 1) await faultMoment(rng.int(2000, 4000));
      await Promise.all(victims.map((v) => spawn(seatOf.get(v) as string)));
    }

    // Drain: every slot of the window fired (bounded: a lost slot never comes), then no more
    // slots (paused), then every run of the schedule final. A bound that passes is the oracle's
    // finding, not an error here.
    const drained = async (what: string, ms: number, check: () => Promise<boolean>) =>
      pollUntil(what, ms, async () => ((await check()) ? true : undefined)).catch(() => false);
    await drained("every slot fired", 20_000, async () => {
      const runs = await readScheduledRuns(database, SCHEDULE);
      return slotFigures(runs, SCHEDULE, window, LATE_MS).lost === 0;
    });
    const paused = await client.pauseSchedule(SCHEDULE);
    await drained("every run of the schedule final", 20_000, async () => {
      const runs = await readScheduledRuns(database, SCHEDULE);
      return runs.every((r) => r.status !== "RUNNING" && r.status !== "PENDING");
    });
    const crashed = engines.filter((c) => !c.alive && !killed.has(c.pid));
    const crashes = crashed.map((c) => c.errors.split("\n").find((l) => /error/i.test(l)) ?? "no stderr");
    await Promise.all(engines.map((c) => c.kill()));

    const slots = slotFigures(await readScheduledRuns(database, SCHEDULE), SCHEDULE, window, LATE_MS);
    const ids = slots.windowRuns.map((r) => r.run_id);
    const { history, sink: effects } = await readOutcome(database, sink);
    const runs = computeOracles(history, effects, ids, {
      expectation: strictlySucceeds,
      killed,
    });
    const lost = slots.lost + runs.lost;
    const doubled = slots.doubled + runs.doubled;
    process.stdout.write(
      `case k pg-schedules: slots ${slots.slots}, lost ${lost}, doubled ${doubled} (seed ${rng.seed}); ` +
        `${kills} kills (${outages} outages of all three engines among them), ${slots.late} slots fired late by catchup (the latest ${(slots.latestMs / 1000).toFixed(1)} s after its slot), ` +
        `${slots.early} runs early, ${runs.stale} stale results; engine clocks ${skews.map((m) => `${m >= 0 ? "+" : ""}${m} min`).join(", ")}\n`,
    );
    expect([...slots.problems, ...runs.problems]).toEqual([]);
    expect({ lost, doubled, early: slots.early, stale: runs.stale }).toEqual({
      lost: 0,
      doubled: 0,
      early: 0,
      stale: 0,
    });
    expect(kills).toBeGreaterThanOrEqual(5);
    expect(outages).toBeGreaterThan(0);
    expect(slots.late, "slots that passed during an outage, fired by catchup").toBeGreaterThan(0);
    expect(skews.sort()).toEqual([-2, 0, 2]);
    expect(paused.last_slot_at).toBeGreaterThanOrEqual(last);
    expect(crashes, "engine processes that died by themselves").toEqual([]);
  } finally {
    await client.close();
    await admin.end();
  }
}, 150_000);
