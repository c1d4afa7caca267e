/**
 * A SIGKILLed `skein serve` on PostgreSQL (the built CLI) is recovered as any engine is: its
 * lock is free once the process is gone, and another engine, with the default engineTimeoutMs
 * (30 s), re-runs its in-flight attempt at its next sweep, before the heartbeat would expire.
 */

import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createEngine } from "../../src/index.js";
import { AGENTS, requireBuiltCli, Skein, until } from "../cli/helpers.js";
import { within } from "../fixtures/child.js";
import { fetchApi, PG_URL } from "../helpers.js";

requireBuiltCli();

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

describe("a SIGKILLed skein serve on PostgreSQL", () => {
  it("has its in-flight attempt re-run by another engine long before its heartbeat expires", async () => {
    const schema = `skein_sfo_${randomBytes(4).toString("hex")}`;
    const url = `${PG_URL}?schema=${schema}`;
    const db = new pg.Client({ connectionString: PG_URL });
    await db.connect();
    const dir = mkdtempSync(join(tmpdir(), "skein-serve-failover-"));
    cleanup.push(async () => {
      rmSync(dir, { recursive: true, force: true });
      await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await db.end();
    });

    const server = new Skein(["serve", "--port", "0", "--agents", AGENTS, "--db", url], dir, {
      SKEIN_LOG_LEVEL: "info",
    });
    cleanup.push(async () => {
      server.proc.kill("SIGKILL");
      await server.exited;
    });
    const [, api] = await server.waitFor(/serving the HTTP API on (http:\/\/\S+)\/v1/, undefined, "stderr");
    const json = { "content-type": "application/json" };
    // `slow` waits 10 minutes: the attempt is in flight when the server dies.
    const workflow = {
      id: "long",
      defaults: { retry_count: 0 },
      nodes: [{ node_id: "a", agent_type: "slow", payload: { ms: 600_000 } }],
    };
    expect(
      (await fetchApi(`${api}/v1/workflows/long`, { method: "PUT", headers: json, body: JSON.stringify(workflow) }))
        .status,
    ).toBe(201);
    const started = await fetchApi(`${api}/v1/runs`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ workflow_id: "long" }),
    });
    const { run_id } = (await started.json()) as { run_id: string };
    await until(
      "the node to run on the server",
      async () => (await (await fetchApi(`${api}/v1/runs/${run_id}`)).json()) as { nodes: { state: string }[] },
      (run) => run.nodes[0]?.state === "RUNNING",
    );

    // Another engine, defaults throughout, running before the kill: it finds the attempt by its sweep.
    const attempts: number[] = [];
    const survivor = await createEngine({
      database: url,
      agents: {
        slow: (task) => {
          attempts.push(task.attempt);
          return { rerun: true };
        },
      },
    });
    cleanup.push(() => survivor.close({ timeoutMs: 100 }));
    server.proc.kill("SIGKILL");
    await server.exited;

    const done = await within(20_000, "the run's end on the survivor", survivor.waitForRun(run_id));
    expect(done.status).toBe("SUCCEEDED");
    expect(attempts).toEqual([2]);
    const { rows } = await db.query<{ heartbeat_at: number; stopped_at: number | null }>(
      `SELECT heartbeat_at::float8 AS heartbeat_at, stopped_at::float8 AS stopped_at FROM "${schema}".engines WHERE engine_id <> $1`,
      [survivor.engineId],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]?.stopped_at).not.toBeNull();
    expect(rows[0]?.stopped_at as number).toBeLessThan((rows[0]?.heartbeat_at as number) + 30_000);
  });
});
