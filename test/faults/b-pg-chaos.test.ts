/**
 * Case b (FAULT-PLAN 13): three engine processes on one PostgreSQL schema serve 200 mixed runs
 * while, at random moments, an engine is SIGKILLed (and a replacement started) or the server
 * terminates every engine connection (pg_terminate_backend, as a failover does). A process the
 * case did not kill must not die (issue 14 item 2: a terminated connection is a retryable error).
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import pg from "pg";
import { expect, it } from "vitest";
import { createClient } from "../../src/index.js";
import type { Child } from "../fixtures/child.js";
import { computeOracles, readOutcome, reportLine } from "./oracles.js";
import {
  caseRng,
  engineProcess,
  faultDir,
  faultMoment,
  finalCount,
  PG_URL,
  pgDatabase,
  pollUntil,
  unfinished,
} from "./setup.js";
import { MIXED, mixedEnds } from "./workflows.js";

const RUNS = 200;
const FAULTS = 10;
const ENGINE = { maxConcurrency: 4, heartbeatIntervalMs: 200, engineTimeoutMs: 1000, sweepIntervalMs: 300 };

it("b: 3 engines on PostgreSQL, random SIGKILL and pg_terminate_backend", async () => {
  const rng = caseRng();
  const app = `skein_fb_${randomBytes(3).toString("hex")}`;
  const { url: database } = pgDatabase(app);
  const sink = join(faultDir(), "sink.log");
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  const client = await createClient({ database: database.replace(app, `${app}_client`) });
  try {
    for (const w of MIXED) await client.registerWorkflow(w);
    const engines: Child[] = [];
    const killed = new Set<number>();
    const spawn = async () => {
      const child = engineProcess(rng, { database, sink, engine: ENGINE });
      engines.push(child);
      await child.waitFor("ready", (m) => m.type === "ready");
    };
    await Promise.all([spawn(), spawn(), spawn()]);
    const runIds: string[] = [];
    for (let i = 0; i < RUNS; i++) {
      const run = await client.startRun(rng.pick(MIXED).id, { input: { i, left: rng.next() < 0.5 } });
      runIds.push(run.run_id);
    }

    let kills = 0;
    let terminated = 0;
    // Kills and terminations alternate (which comes first is random), at random moments.
    const first = rng.int(0, 1);
    for (let f = 0; f < FAULTS && (await finalCount(database)) < RUNS; f++) {
      await faultMoment(rng.int(200, 900));
      if ((f + first) % 2 === 0) {
        const alive = engines.filter((c) => c.alive && !killed.has(c.pid));
        const victim = rng.pick(alive);
        if (victim) {
          killed.add(victim.pid);
          await victim.kill();
          kills += 1;
          await spawn();
        }
      } else {
        const { rows } = await admin.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
          [app],
        );
        terminated += rows.length;
      }
    }
    // T_max: attempts take at most 120 ms, retries 50 ms; a dead engine is recovered within about 1.3 s.
    await pollUntil(
      "every run final",
      40_000,
      async () => ((await finalCount(database)) >= RUNS ? true : undefined),
      () => unfinished(database, rng, engines),
    );
    const crashed = engines.filter((c) => !c.alive && !killed.has(c.pid));
    const crashes = crashed.map((c) => c.errors.split("\n").find((l) => /error/i.test(l)) ?? "no stderr");
    await Promise.all(engines.map((c) => c.kill()));

    const { history, sink: effects } = await readOutcome(database, sink);
    const figures = computeOracles(history, effects, runIds, { expectation: mixedEnds, killed });
    reportLine(
      "b pg-chaos",
      figures,
      rng.seed,
      `${kills} kills, ${terminated} connections terminated, ${crashed.length} engines died by themselves`,
    );
    expect(figures.problems).toEqual([]);
    expect({ lost: figures.lost, doubled: figures.doubled, stale: figures.stale }).toEqual({
      lost: 0,
      doubled: 0,
      stale: 0,
    });
    expect(kills).toBeGreaterThan(0);
    expect(terminated).toBeGreaterThan(0);
    expect(crashes, "engine processes that died of a terminated connection").toEqual([]);
  } finally {
    await client.close();
    await admin.end();
  }
}, 65_000);
