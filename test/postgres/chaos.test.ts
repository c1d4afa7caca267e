/**
 * Multi-process chaos (DESIGN §7–8): three engine processes on one PostgreSQL schema serve 500
 * runs of a fan-out/join workflow while the test SIGKILLs a random engine every 2 s and starts a
 * replacement. Afterwards every run SUCCEEDED, each join fired once, no attempt was held by two
 * engines at once, nothing that SUCCEEDED ran again, and every visit's side effect (applied
 * once per execution_id, as the agent contract asks) exists exactly once.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createClient } from "../../src/index.js";
import { Child, within } from "../fixtures/child.js";
import { PG_URL, tempDir } from "../helpers.js";

/** Runs on the built package: `npm test` builds before it runs vitest. */
const CHILD = fileURLToPath(new URL("../fixtures/pg-chaos-child.mjs", import.meta.url));
const RUNS = 500;

const FAN = {
  id: "chaos-fan",
  defaults: { retry_count: 5, retry_interval: 0.2, timeout: 30 },
  nodes: [
    { node_id: "start", agent_type: "work" },
    { node_id: "a", agent_type: "work", depends_on: ["start"] },
    { node_id: "b", agent_type: "work", depends_on: ["start"] },
    { node_id: "c", agent_type: "work", depends_on: ["start"] },
    { node_id: "join", agent_type: "join", depends_on: ["a", "b", "c"] },
  ],
};

const children: Child[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
});

describe("several engine processes on PostgreSQL, with engines killed", () => {
  it("serves 500 fan-out/join runs while an engine is SIGKILLed every 2 s", async () => {
    const schema = `skein_chaos_${randomBytes(4).toString("hex")}`;
    const url = `${PG_URL}?schema=${schema}`;
    const logFile = join(tempDir(), "agents.log");
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      // The client migrates the schema; the side-effect table lives beside Skein's.
      const client = await createClient({ database: url });
      await admin.query(`CREATE TABLE "${schema}".chaos_effects (execution_id text PRIMARY KEY, pid int NOT NULL)`);
      await client.registerWorkflow(FAN);
      const spawn = async () => {
        const child = new Child(CHILD, [url, logFile]);
        children.push(child);
        await child.waitFor("ready", (m) => m.type === "ready");
        return child;
      };
      await Promise.all([spawn(), spawn(), spawn()]);
      const runIds: string[] = [];
      for (let i = 0; i < RUNS; i++) runIds.push((await client.startRun(FAN.id, { input: { i } })).run_id);

      const finished = async () => {
        const { rows } = await admin.query(
          `SELECT count(*)::int AS n FROM "${schema}".runs WHERE status IN ('SUCCEEDED','FAILED','CANCELLED')`,
        );
        return (rows[0] as { n: number }).n;
      };
      // Every 2 s: SIGKILL a random engine and start a replacement.
      let kills = 0;
      await within(
        180_000,
        "the end of 500 runs under chaos",
        (async () => {
          while ((await finished()) < RUNS) {
            await new Promise((resolve) => setTimeout(resolve, 2_000));
            const alive = children.filter(
              (c) =>
                c.proc.exitCode === null && c.proc.signalCode === null && c.messages.some((m) => m.type === "ready"),
            );
            const victim = alive[Math.floor(Math.random() * alive.length)];
            if (victim) {
              await victim.kill();
              kills += 1;
            }
            void spawn().catch(() => {}); // a replacement killed before it was up is replaced next time
          }
        })(),
      );
      await client.close();
      expect(kills).toBeGreaterThan(0);

      const q = async <T>(sql: string) => (await admin.query(sql.replaceAll("S.", `"${schema}".`))).rows as T[];
      const statuses = await q<{ status: string; n: number }>(
        "SELECT status, count(*)::int AS n FROM S.runs GROUP BY status",
      );
      const interrupted = await q<{ interruptions: number; n: number }>(
        "SELECT interruptions, count(*)::int AS n FROM S.visits GROUP BY interruptions ORDER BY 1",
      );
      expect(statuses, `kills ${kills}, interruptions ${JSON.stringify(interrupted)}`).toEqual([
        { status: "SUCCEEDED", n: RUNS },
      ]);
      // Each join fired once: one visit, one success.
      const joins = await q<{ run_id: string; n: number }>(
        "SELECT run_id, count(*)::int AS n FROM S.events WHERE type = 'node.succeeded' AND node_id = 'join' GROUP BY run_id",
      );
      expect(joins).toHaveLength(RUNS);
      expect(joins.every((j) => j.n === 1)).toBe(true);
      const visits = await q<{ execution_id: string; state: string; attempt: number; visit: number }>(
        "SELECT execution_id, state, attempt, visit FROM S.visits",
      );
      expect(visits).toHaveLength(RUNS * FAN.nodes.length);
      expect(visits.every((v) => v.state === "SUCCEEDED" && v.visit === 1)).toBe(true);
      // No attempt was started twice (two engines never held it at once), and no attempt ran
      // after the one that succeeded.
      const final = new Map(visits.map((v) => [v.execution_id, v.attempt]));
      const starts = readFileSync(logFile, "utf8")
        .split("\n")
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l) as { execution_id: string; attempt: number });
      const seen = new Set<string>();
      for (const s of starts) {
        const key = `${s.execution_id}#${s.attempt}`;
        expect(seen.has(key), `${key} started twice`).toBe(false);
        seen.add(key);
        expect(s.attempt, `${s.execution_id} ran after it succeeded`).toBeLessThanOrEqual(
          final.get(s.execution_id) ?? 0,
        );
      }
      // Every visit's effect, once.
      const effects = await q<{ execution_id: string }>("SELECT execution_id FROM S.chaos_effects");
      expect(new Set(effects.map((e) => e.execution_id))).toEqual(new Set(final.keys()));
    } finally {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  }, 240_000);
});
