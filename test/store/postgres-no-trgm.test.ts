/**
 * Migration 012 on a PostgreSQL database where the store's role may not create pg_trgm (a
 * managed server, a locked-down role): the engine still opens and `q` still finds runs, only
 * without the trigram indexes. A fresh database and role of the local server, dropped afterwards.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createEngine } from "../../src/index.js";
import { PG_URL } from "../helpers.js";
import { describeStore } from "./stores.js";

const name = `skein_notrgm_${randomBytes(4).toString("hex")}`;
const admin = (database: string) => {
  const u = new URL(PG_URL);
  u.pathname = `/${database}`;
  return new pg.Client({ connectionString: u.toString() });
};

describeStore("postgres")("text search without pg_trgm", () => {
  beforeAll(async () => {
    const server = admin("postgres");
    await server.connect();
    await server.query(`CREATE ROLE ${name} LOGIN`);
    await server.query(`CREATE DATABASE ${name}`);
    await server.end();
    const db = admin(name);
    await db.connect();
    // The role may use its own schema but create nothing else in the database (no extension).
    await db.query(`REVOKE CREATE ON DATABASE ${name} FROM PUBLIC`);
    await db.query(`CREATE SCHEMA skein AUTHORIZATION ${name}`);
    await db.end();
  });

  afterAll(async () => {
    const server = admin("postgres");
    await server.connect();
    await server.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await server.query(`DROP ROLE IF EXISTS ${name}`);
    await server.end();
  });

  it("opens, migrates without the trigram indexes, and still finds a run by its input", async () => {
    const u = new URL(PG_URL);
    u.username = name;
    u.pathname = `/${name}`;
    u.searchParams.set("schema", "skein");
    const engine = await createEngine({ database: u.toString(), agents: { echo: (t) => ({ got: t.payload }) } });
    try {
      await engine.registerWorkflow({ id: "echo", nodes: [{ node_id: "a", agent_type: "echo" }] });
      const run = await engine.startRun("echo", { input: { city: "Timbuktu" } });
      await engine.waitForRun(run.run_id);
      expect((await engine.listRuns({ q: "timbuk" })).map((r) => r.run_id)).toEqual([run.run_id]);
    } finally {
      await engine.close();
    }
    const db = admin(name);
    await db.connect();
    const { rows } = await db.query("SELECT extname FROM pg_extension WHERE extname = 'pg_trgm'");
    const indexes = await db.query(
      "SELECT indexname FROM pg_indexes WHERE schemaname = 'skein' AND indexname LIKE '%trgm'",
    );
    await db.end();
    expect(rows).toEqual([]);
    expect(indexes.rows).toEqual([]);
  });
});
