/** `skein engine`: a headless engine runs what `skein start` starts, logs JSON lines, stops on SIGTERM. */
import { describe, expect, it } from "vitest";
import { onPostgres, stallResults } from "../helpers.js";
import { AGENTS, json, requireBuiltCli, Skein, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

describe("skein engine", () => {
  it("serves runs started elsewhere, logs one JSON line per event, and stops gracefully on SIGTERM", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ws.file("s.json", WORKFLOWS.small), ...db], ws.dir);
    const engine = new Skein(["engine", "--agents", AGENTS, ...db], ws.dir);
    await engine.waitFor(/"msg":"engine started/);

    if (!onPostgres) {
      // One engine per SQLite file: a second is refused (PostgreSQL takes many).
      const second = await skein(["engine", "--agents", AGENTS, ...db], ws.dir);
      expect(second.code).toBe(2);
      expect(second.stderr).toMatch(/^skein: database .* is in use by engine /);
    }

    const started = await skein(["start", "small", ...db], ws.dir);
    const runId = started.stdout.trim();
    await engine.waitFor(new RegExp(`"event":"run.succeeded","run_id":"${runId}"`));
    engine.proc.kill("SIGTERM");
    const result = await engine.result();
    expect(result.code, result.stderr).toBe(0);

    const logs = result.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const events = logs.filter((l) => l.event !== undefined);
    expect(events.length).toBeGreaterThan(0);
    for (const e of events) {
      expect(e).toMatchObject({ run_id: runId, trace_id: expect.stringMatching(/^[0-9a-f]{32}$/) });
      expect(e).toHaveProperty("node_id");
      expect(e).toHaveProperty("visit");
    }
    expect(events).toContainEqual(expect.objectContaining({ event: "node.retrying", node_id: "b", visit: 1 }));
    expect(logs.at(-1)).toMatchObject({ msg: "engine stopped" });

    const status = json<{ status: string }>(await skein(["status", runId, "--json", ...db], ws.dir));
    expect(status.status).toBe("SUCCEEDED");
  });

  // A real transient failure on PostgreSQL: a trigger aborts with serialization_failure (40001)
  // whenever a result says "stall", so the engine retries that result until it stops.
  it.skipIf(!onPostgres)(
    "exits on SIGTERM while a transaction keeps failing, without flooding its log",
    async () => {
      const ws = workspace();
      const db = ["--db", ws.db];
      const one = { id: "one", nodes: [{ node_id: "a", agent_type: "echo" }] };
      await skein(["workflows", "put", ws.file("one.json", one), ...db], ws.dir);
      await stallResults(ws.db);
      const engine = new Skein(["engine", "--agents", AGENTS, ...db], ws.dir);
      await engine.waitFor(/"msg":"engine started/);
      await skein(["start", "one", "--input", '{"say":"stall"}', ...db], ws.dir);
      await engine.waitFor(/a transaction failed; retrying it/);
      engine.proc.kill("SIGTERM");
      // It tries to record the result for up to its close timeout (10 s), then exits.
      const result = await engine.result(30_000);
      expect(result.code, result.stderr).toBe(0);
      const lines = result.stdout.trim().split("\n");
      expect(lines.at(-1)).toMatch(/"msg":"engine stopped"/);
      // Retries pause up to 1 s each: a few dozen lines, not megabytes.
      expect(lines.filter((l) => l.includes("retrying it")).length).toBeLessThan(40);
    },
    60_000,
  );
});
