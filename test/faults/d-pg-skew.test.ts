/**
 * Case d (issue 14 item 5; FAULT-PLAN 11): three engine processes on one PostgreSQL schema, one
 * on the real clock, one 5 minutes behind and one 5 minutes ahead (libfaketime), each starting
 * runs of its own. On PostgreSQL every due time comes from the database's clock (DESIGN §7):
 * no run fails `run_timeout` at once, no run gets a TTL minutes too long, and no engine reclaims
 * another's attempts early (no engine dies here, so nothing may be interrupted).
 */
import { join } from "node:path";
import pg from "pg";
import { expect, it } from "vitest";
import type { Child } from "../fixtures/child.js";
import { computeOracles, readOutcome, reportLine } from "./oracles.js";
import {
  acknowledged,
  caseRng,
  databaseNow,
  engineProcess,
  faketimeEnv,
  faultDir,
  finalCount,
  PG_URL,
  pgDatabase,
  pollUntil,
} from "./setup.js";
import { FAN } from "./workflows.js";

const PER_ENGINE = 30;
const TTL_S = 120;
/** A short engine timeout (far below the skew) so that a clock judged wrongly shows at once, not so short that load does. */
const ENGINE = { maxConcurrency: 6, heartbeatIntervalMs: 300, engineTimeoutMs: 3000, sweepIntervalMs: 300 };

it("d: engine clocks skewed ±5 min on PostgreSQL", async () => {
  const rng = caseRng();
  const { url: database } = pgDatabase();
  const sink = join(faultDir(), "sink.log");
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    const workflow = { ...FAN, timeout: TTL_S, defaults: { ...FAN.defaults, timeout: 30 } };
    const before = await databaseNow(admin);
    // The order the engines start in is random: the first one migrates and registers.
    const offsets = ["+0", "-5m", "+5m"].sort(() => rng.next() - 0.5);
    const engines: Child[] = [];
    for (const offset of offsets) {
      const start = Array.from({ length: PER_ENGINE }, (_, i) => ({
        workflow_id: FAN.id,
        input: { i, offset },
        key: `d${offset}-${i}`,
      }));
      const env = offset === "+0" ? {} : faketimeEnv(offset);
      const child = engineProcess(rng, { database, sink, workflows: [workflow], start, engine: ENGINE }, env);
      engines.push(child);
      await child.waitFor("ready", (m) => m.type === "ready");
    }
    const skews = engines.map((c) => {
      const ready = c.messages.find((m) => m.type === "ready");
      return Math.round(((ready?.now as number) - Date.now()) / 60_000) || 0; // never -0
    });
    await pollUntil("every run started", 15_000, () =>
      acknowledged(engines).size === 3 * PER_ENGINE ? true : undefined,
    );
    // T_max: attempts take at most 120 ms; nothing here waits for a timeout.
    await pollUntil("every run final", 20_000, async () =>
      (await finalCount(database)) >= 3 * PER_ENGINE ? true : undefined,
    );
    const after = await databaseNow(admin);
    await Promise.all(engines.map((c) => c.kill()));

    const { history, sink: effects } = await readOutcome(database, sink);
    const acked = [...acknowledged(engines).values()];
    const figures = computeOracles(history, effects, acked);
    const timedOut = history.runs.filter((r) => r.error?.reason === "run_timeout").length;
    const interrupted = history.events.filter((e) => e.type === "node.interrupted").length;
    // A run's TTL counts from its start by the database's clock.
    const badDeadlines = history.runs.filter(
      (r) => r.deadline_at < before + TTL_S * 1000 || r.deadline_at > after + TTL_S * 1000,
    ).length;
    reportLine(
      "d pg-skew",
      figures,
      rng.seed,
      `engine clocks ${skews.map((m) => `${m >= 0 ? "+" : ""}${m} min`).join(", ")}; ${timedOut} run_timeout, ${badDeadlines} deadlines off the database clock, ${interrupted} early reclaims`,
    );
    expect(acked).toHaveLength(3 * PER_ENGINE);
    expect(skews.sort()).toEqual([-5, 0, 5]);
    expect(figures.problems).toEqual([]);
    expect({ lost: figures.lost, doubled: figures.doubled, stale: figures.stale }).toEqual({
      lost: 0,
      doubled: 0,
      stale: 0,
    });
    expect({ timedOut, badDeadlines, interrupted }).toEqual({ timedOut: 0, badDeadlines: 0, interrupted: 0 });
  } finally {
    await admin.end();
  }
}, 45_000);
