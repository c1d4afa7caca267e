/**
 * The commands that read and write through a client (no engine): workflows, workflows put,
 * start, status, list, events, fork. Their exit codes and --json outputs.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AGENTS, json, lines, type RunJson, requireBuiltCli, Skein, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

describe("skein workflows", () => {
  it("puts a workflow (created, then unchanged, then a new version) and lists the latest versions", async () => {
    const ws = workspace();
    const file = ws.file("small.json", WORKFLOWS.small);
    const db = ["--db", ws.db];
    const first = await skein(["workflows", "put", file, ...db], ws.dir);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe("small v1 created\n");
    const again = await skein(["workflows", "put", file, "--json", ...db], ws.dir);
    expect(json(again)).toEqual({
      id: "small",
      version: 1,
      created: false,
      warnings: [],
      upgradable: { active: 0, checked: 0, compatible: 0 },
    });
    ws.file("small.json", { ...WORKFLOWS.small, description: "changed" });
    expect((await skein(["workflows", "put", file, ...db], ws.dir)).stdout).toBe("small v2 created\n");
    await skein(["workflows", "put", ws.file("f.json", WORKFLOWS.failing), ...db], ws.dir);
    const list = await skein(["workflows", "--json", ...db], ws.dir);
    expect(list.code).toBe(0);
    const ids = json<{ id: string; version: number }[]>(list).map((w) => [w.id, w.version]);
    expect(ids.sort()).toEqual([
      ["failing", 1],
      ["small", 2],
    ]);
    const text = await skein(["workflows", ...db], ws.dir);
    expect(text.stdout).toMatch(/^small +2 +\d{4}-/m);
  });

  it("warns with the path, and about agent types only when --agents is given", async () => {
    const ws = workspace();
    const file = ws.file("w.json", {
      id: "w",
      defaults: { timeout: 100000 },
      nodes: [{ node_id: "a", agent_type: "translator" }],
    });
    const plain = await skein(["workflows", "put", file, "--db", ws.db], ws.dir);
    expect(plain.code).toBe(0);
    expect(plain.stderr).toContain("skein: warning: ");
    expect(plain.stderr).toContain("defaults.timeout: timeout 100000 s is at or above the workflow timeout");
    expect(plain.stderr).not.toContain("translator");
    const checked = await skein(["workflows", "put", file, "--agents", AGENTS, "--db", ws.db], ws.dir);
    expect(checked.stderr).toContain('nodes[0].agent_type: no agent is registered for agent_type "translator"');
  });

  it("exits 2 for an invalid file and registers nothing", async () => {
    const ws = workspace();
    const file = ws.file("bad.json", { id: "bad", nodes: [{ node_id: "a", agent_type: "x", depends_on: ["zz"] }] });
    const r = await skein(["workflows", "put", file, "--db", ws.db], ws.dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('nodes[0].depends_on[0]: unknown node "zz"');
    expect(r.stderr).toContain("nothing was registered");
  });
});

describe("skein start, status, list, events", () => {
  it("starts runs with --tag and lists them by --tag (every one given); a malformed tag exits 2", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ws.file("w.json", WORKFLOWS.small), ...db], ws.dir);
    const start = async (...tags: string[]) => {
      const r = await skein(["start", "small", ...tags.flatMap((t) => ["--tag", t]), ...db], ws.dir);
      expect(r.code, r.stderr).toBe(0);
      return r.stdout.trim();
    };
    const acme = await start("customer=acme", "tier=gold");
    const globex = await start("customer=globex", "tier=gold");
    const listed = async (...tags: string[]) => {
      const r = await skein(["list", ...tags.flatMap((t) => ["--tag", t]), "--json", ...db], ws.dir);
      expect(r.code, r.stderr).toBe(0);
      return json<{ run_id: string; tags: Record<string, string> }[]>(r);
    };
    expect((await listed("customer=acme")).map((r) => [r.run_id, r.tags])).toEqual([
      [acme, { customer: "acme", tier: "gold" }],
    ]);
    expect((await listed("tier=gold")).map((r) => r.run_id).sort()).toEqual([acme, globex].sort());
    expect((await listed("tier=gold", "customer=globex")).map((r) => r.run_id)).toEqual([globex]);
    const bad = await skein(["list", "--tag", "customer", ...db], ws.dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("expected name=value");
  });

  it("starts a run with --priority, which list --json shows; one not 0 to 9 exits 2 naming the flag", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ws.file("w.json", WORKFLOWS.small), ...db], ws.dir);
    const started = await skein(["start", "small", "--priority", "1", ...db], ws.dir);
    expect(started.code, started.stderr).toBe(0);
    const listed = await skein(["list", "--json", ...db], ws.dir);
    expect(json<{ run_id: string; priority: number }[]>(listed)).toEqual([
      expect.objectContaining({ run_id: started.stdout.trim(), priority: 1 }),
    ]);
    const bad = await skein(["start", "small", "--priority", "12", ...db], ws.dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--priority");
    expect(bad.stderr).toContain("expected a whole number from 0 (claimed first) to 9 (claimed last)");
  });

  it("starts a run without an engine, and reads it back", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ws.file("w.json", WORKFLOWS.withInput), ...db], ws.dir);
    const started = await skein(["start", "with-input", "--input", '{"topic":"t"}', ...db], ws.dir);
    expect(started.code, started.stderr).toBe(0);
    const runId = started.stdout.trim();
    expect(runId).toMatch(/^[0-9a-f-]{36}$/);

    const status = await skein(["status", runId, "--json", ...db], ws.dir);
    expect(status.code).toBe(0);
    const run = json<RunJson>(status);
    expect(run).toMatchObject({ run_id: runId, workflow_id: "with-input", status: "RUNNING", input: { topic: "t" } });
    expect(run.nodes.map((n) => n.node_id)).toEqual(["a"]);
    const text = await skein(["status", runId, ...db], ws.dir);
    expect(text.stdout).toMatch(new RegExp(`^run ${runId} {2}with-input v1 {2}RUNNING {2}for `));

    const events = await skein(["events", runId, "--json", ...db], ws.dir);
    expect(events.code).toBe(0);
    const types = lines(events).map((e) => (e as { type: string }).type);
    expect(types).toEqual(["run.started", "node.ready"]);
    const timeline = await skein(["events", runId, ...db], ws.dir);
    expect(timeline.stdout).toMatch(/^ +\d+ ms {2}run\.started +workflow with-input v1$/m);
  });

  it("starts a run with --budget; status shows its usage line, --json its usage and budget", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ws.file("w.json", WORKFLOWS.withInput), ...db], ws.dir);
    const started = await skein(
      ["start", "with-input", "--input", '{"topic":"t"}', "--budget", '{"max_tokens":1000}', ...db],
      ws.dir,
    );
    expect(started.code, started.stderr).toBe(0);
    const runId = started.stdout.trim();
    const run = json<RunJson & { usage: unknown; budget: unknown }>(
      await skein(["status", runId, "--json", ...db], ws.dir),
    );
    expect(run).toMatchObject({ usage: { tokens_in: 0, tokens_out: 0, cost: 0 }, budget: { max_tokens: 1000 } });
    const text = await skein(["status", runId, ...db], ws.dir);
    expect(text.stdout).toContain("\nusage: 0 tokens (in 0, out 0), cost 0; budget: max_tokens 1000\n");
    const bad = await skein(
      ["start", "with-input", "--input", '{"topic":"t"}', "--budget", '{"max_tokens":-1}', ...db],
      ws.dir,
    );
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("budget.max_tokens must be a non-negative finite number, got -1");
  });

  it("returns the same run for the same idempotency key", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ws.file("w.json", WORKFLOWS.withInput), ...db], ws.dir);
    const args = ["start", "with-input", "--input", '{"topic":"t"}', "--idempotency-key", "req-1", ...db];
    const [a, b] = [await skein(args, ws.dir), await skein(args, ws.dir)];
    expect(a.stdout).toBe(b.stdout);
  });

  it("lists runs newest first, filtered by status and workflow, limited", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    expect((await skein(["run", ws.file("s.json", WORKFLOWS.small), "--agents", AGENTS, ...db], ws.dir)).code).toBe(0);
    expect((await skein(["run", ws.file("f.json", WORKFLOWS.failing), "--agents", AGENTS, ...db], ws.dir)).code).toBe(
      1,
    );
    expect((await skein(["run", "small", "--agents", AGENTS, ...db], ws.dir)).code).toBe(0);

    const all = json<RunJson[]>(await skein(["list", "--json", ...db], ws.dir));
    expect(all.map((r) => [r.workflow_id, r.status])).toEqual([
      ["small", "SUCCEEDED"],
      ["failing", "FAILED"],
      ["small", "SUCCEEDED"],
    ]);
    const failed = json<RunJson[]>(await skein(["list", "--status", "FAILED", "--json", ...db], ws.dir));
    expect(failed.map((r) => r.workflow_id)).toEqual(["failing"]);
    const small = json<RunJson[]>(
      await skein(["list", "--workflow", "small", "--limit", "1", "--json", ...db], ws.dir),
    );
    expect(small.map((r) => r.run_id)).toEqual([all[0]?.run_id]);
    const text = await skein(["list", ...db], ws.dir);
    expect(text.stdout.split("\n")[0]).toMatch(/^run_id +workflow +status +created +duration$/);
  });

  it("lists runs by text in their input, part of the run id and age (--search, --id, --since)", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ws.file("w.json", WORKFLOWS.withInput), ...db], ws.dir);
    const start = async (topic: string) =>
      (await skein(["start", "with-input", "--input", JSON.stringify({ topic }), ...db], ws.dir)).stdout.trim();
    await start("Durable Kittens");
    await start("puppies");
    const ids = async (...args: string[]) =>
      json<RunJson[]>(await skein(["list", ...args, "--json", ...db], ws.dir)).map((r) => r.run_id);
    const found = json<RunJson[]>(await skein(["list", "--search", "kittens", "--json", ...db], ws.dir));
    expect(found.map((r) => r.input)).toEqual([{ topic: "Durable Kittens" }]);
    const [first] = found;
    expect(await ids("--id", (first?.run_id ?? "").slice(0, 32))).toEqual([first?.run_id]);
    // The end, as other commands accept it (a UUIDv7's start is a time recent runs share).
    expect(await ids("--id", (first?.run_id ?? "").slice(-12).toUpperCase())).toEqual([first?.run_id]);
    expect(await ids("--since", "1h")).toHaveLength(2);
    const short = await skein(["list", "--search", "ki", ...db], ws.dir);
    expect(short.code).toBe(2);
    expect(short.stderr).toMatch(/at least 3 characters/);
    expect((await skein(["list", "--since", "yesterday", ...db], ws.dir)).stderr).toMatch(/expected a duration/);
  });

  it("exits 2 for an unknown run, a bad --limit, a missing database and unknown workflow", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ws.file("s.json", WORKFLOWS.small), ...db], ws.dir);
    const missingDb = ["--db", `sqlite:${join(ws.dir, "missing.db")}`];
    const results = await Promise.all([
      skein(["status", "nope", ...db], ws.dir),
      skein(["events", "nope", "--json", ...db], ws.dir),
      skein(["list", "--limit", "0", ...db], ws.dir),
      skein(["list", ...missingDb], ws.dir),
      skein(["start", "nope", ...db], ws.dir),
      skein(["start", "small", "--input", "[1,", ...db], ws.dir),
    ]);
    for (const r of results) expect(r.code, r.stderr).toBe(2);
    const [status, events, limit, missing, start, input] = results.map((r) => r.stderr);
    expect(status).toMatch(/^skein: run nope does not exist in (sqlite|postgres):/);
    expect(events).toMatch(/^skein: run nope does not exist in (sqlite|postgres):/);
    expect(limit).toContain("expected a whole number from 1 to 1000");
    expect(missing).toMatch(/^skein: no database at .*missing\.db: pass --db/);
    expect(start).toMatch(/^skein: workflow "nope" is not registered/);
    expect(input).toMatch(/^skein: --input is not valid JSON/);
  });

  it("reads the database from SKEIN_DB when --db is absent", async () => {
    const ws = workspace();
    await skein(["workflows", "put", ws.file("s.json", WORKFLOWS.small), "--db", ws.db], ws.dir);
    const r = await new Skein(["workflows", "--json"], ws.dir, { SKEIN_DB: ws.db }).result();
    expect(r.code, r.stderr).toBe(0);
    expect(json<{ id: string }[]>(r).map((w) => w.id)).toEqual(["small"]);
  });
});
