/**
 * `skein run`: live lines, the report, --json, exit codes (0, 1, 2) on both stores. Its agents
 * modules and bad input: agents-module.test.ts.
 */
import { describe, expect, it } from "vitest";
import { onPostgres } from "../helpers.js";
import { AGENTS, json, requireBuiltCli, Skein, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

interface RunJson {
  run_id: string;
  status: string;
  output: unknown;
  error: { message: string } | null;
  nodes: { node_id: string; state: string; attempt: number; error: { message: string } | null }[];
}

describe("skein run", () => {
  it("runs a workflow file to SUCCEEDED: one line per event, then the report (exit 0)", async () => {
    const ws = workspace();
    const file = ws.file("small.json", WORKFLOWS.small);
    const r = await skein(["run", file, "--agents", AGENTS, "--db", ws.db, "--input", '{"topic":"agents"}'], ws.dir);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split("\n");
    expect(lines[0]).toMatch(/^run [0-9a-f-]{36} started$/);
    expect(r.stdout).toMatch(/^ +\d+ ms {2}node\.started +a#1 attempt 1$/m);
    expect(r.stdout).toMatch(/^ +\d+ ms {2}node\.retrying +b#1 attempt 1 failed: 502 Bad Gateway; retry in \d+ ms$/m);
    expect(r.stdout).toMatch(/^ +\d+ ms {2}run\.succeeded +SUCCEEDED$/m);
    expect(r.stdout).toMatch(/^run \S+ {2}small v1 {2}SUCCEEDED {2}in /m);
    // The report: per-node attempts and retries, then the output.
    expect(r.stdout).toMatch(/^b +SUCCEEDED +1 +2 +1 +\d+ ms +502 Bad Gateway$/m);
    expect(r.stdout).toContain('output:\n{\n  "d": {');
  });

  it("prints the finished run as one JSON object with --json", async () => {
    const ws = workspace();
    const input = ws.file("input.json", { topic: "agents" });
    const r = await skein(
      [
        "run",
        ws.file("small.json", WORKFLOWS.small),
        "--agents",
        AGENTS,
        "--db",
        ws.db,
        "--input",
        `@${input}`,
        "--json",
      ],
      ws.dir,
    );
    expect(r.code, r.stderr).toBe(0);
    const run = json<RunJson>(r);
    expect(run.status).toBe("SUCCEEDED");
    expect(r.stderr).toContain(`run ${run.run_id} started`);
    expect(run.nodes.map((n) => [n.node_id, n.state, n.attempt])).toEqual([
      ["a", "SUCCEEDED", 1],
      ["b", "SUCCEEDED", 2],
      ["c", "SUCCEEDED", 1],
      ["d", "SUCCEEDED", 1],
    ]);
    expect(run.output).toEqual({ d: { b: { node: "b", attempt: 2 }, c: { node: "c", attempt: 1 } } });
  });

  it("exits 1 for a FAILED run, with the error in the report", async () => {
    const ws = workspace();
    const r = await skein(["run", ws.file("f.json", WORKFLOWS.failing), "--agents", AGENTS, "--db", ws.db], ws.dir);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^ +\d+ ms {2}node\.failed +b#1 non_retryable: the upstream API said no$/m);
    expect(r.stdout).toMatch(/^run \S+ {2}failing v1 {2}FAILED {2}in /m);
    expect(r.stdout).toContain("error: node b failed (non_retryable): the upstream API said no");
    expect(r.stdout).toMatch(/^c +SKIPPED/m);
    const j = await skein(["run", "failing", "--agents", AGENTS, "--db", ws.db, "--json"], ws.dir);
    expect(j.code).toBe(1);
    expect(json<RunJson>(j).status).toBe("FAILED");
  });

  it("survives a poison template in a real process: the visit fails, the process does not abort", async () => {
    const ws = workspace();
    const pad = ws.file("pad.json", {
      id: "pad",
      nodes: [{ node_id: "a", agent_type: "echo", payload: { n: '{{ $length($pad("", input.n)) }}' } }],
    });
    // Before the sandbox, V8 aborted the process here (a fatal out-of-memory error, no report).
    const r = await skein(["run", pad, "--agents", AGENTS, "--db", ws.db, "--input", '{"n": 200000000}'], ws.dir);
    expect(r.signal).toBeNull();
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("error: node a failed (template_error)");
    expect(r.stdout).toContain("$pad width 200000000 is over the limit");
  });

  it("runs a registered workflow by id, with the input checked against its schema", async () => {
    const ws = workspace();
    const put = await skein(["workflows", "put", ws.file("w.json", WORKFLOWS.withInput), "--db", ws.db], ws.dir);
    expect(put.code).toBe(0);
    const ok = await skein(
      ["run", "with-input", "--agents", AGENTS, "--db", ws.db, "--input", '{"topic":"x"}'],
      ws.dir,
    );
    expect(ok.code, ok.stderr).toBe(0);
    const bad = await skein(["run", "with-input", "--agents", AGENTS, "--db", ws.db, "--input", "{}"], ws.dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^skein: Run input does not match the input_schema of with-input:\n {2}input: /);
  });

  it.skipIf(onPostgres)("exits 2 when the database is in use by another engine", async () => {
    const ws = workspace();
    // b outlasts the test (killed at its end): a b of 2.5 s had ended, and the first engine closed
    // the database, before the second command's cold start on a loaded machine.
    const held = {
      ...WORKFLOWS.long,
      nodes: WORKFLOWS.long.nodes.map((n) => (n.node_id === "b" ? { ...n, payload: { ms: 55_000 } } : n)),
    };
    const file = ws.file("long.json", held);
    const first = new Skein(["run", file, "--agents", AGENTS, "--db", ws.db], ws.dir);
    await first.waitFor(/node\.started +b#1/);
    const second = await skein(["run", file, "--agents", AGENTS, "--db", ws.db], ws.dir);
    expect(second.code).toBe(2);
    expect(second.stderr).toMatch(/^skein: database .* is in use by engine /);
    first.proc.kill("SIGKILL");
    await first.result();
  });
});
