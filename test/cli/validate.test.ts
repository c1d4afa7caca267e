/** `skein validate`: every problem with its path (exit 2), warnings, JSON output, unreadable files. */
import { writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { AGENTS, json, requireBuiltCli, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

describe("skein validate", () => {
  it("exits 0 for a valid workflow", async () => {
    const ws = workspace();
    const r = await skein(["validate", ws.file("small.json", WORKFLOWS.small)], ws.dir);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('valid workflow "small" (4 nodes)');
  });

  it("lists every problem with its path and exits 2", async () => {
    const ws = workspace();
    const file = ws.file("bad.json", {
      id: "Bad Id",
      nodes: [
        { node_id: "a", agent_type: "echo", depends_on: ["fetch_x"] },
        { node_id: "a", agent_type: "echo", next_on_success: "nowhere" },
      ],
    });
    const r = await skein(["validate", file], ws.dir);
    expect(r.code).toBe(2);
    // The schema's problems come first, and the graph's are listed with them (not after a fix).
    expect(r.stdout).toMatch(/^id: must be 1 to 64 lowercase letters/m);
    expect(r.stdout.trim().split("\n")).toContain('nodes[0].depends_on[0]: unknown node "fetch_x"');
    const graphOnly = ws.file("graph.json", {
      id: "graph-problems",
      nodes: [
        { node_id: "a", agent_type: "echo", depends_on: ["fetch_x"] },
        { node_id: "a", agent_type: "echo", next_on_success: "nowhere" },
      ],
    });
    const g = await skein(["validate", graphOnly], ws.dir);
    expect(g.code).toBe(2);
    const lines = g.stdout.trim().split("\n");
    expect(lines).toContain('nodes[0].depends_on[0]: unknown node "fetch_x"');
    expect(lines).toContain('nodes[1].node_id: duplicate node id "a": nodes[0] already uses it');
    expect(lines).toContain('nodes[1].next_on_success: unknown node "nowhere"');
    expect(g.stderr).toMatch(/^skein: .*graph\.json is not a valid workflow: 3 problems/);
  });

  it("prints { ok, errors, warnings } with --json", async () => {
    const ws = workspace();
    const file = ws.file("bad.json", { id: "x", nodes: [{ node_id: "a", agent_type: "echo", retry_count: -1 }] });
    const r = await skein(["validate", file, "--json"], ws.dir);
    expect(r.code).toBe(2);
    const out = json<{ ok: boolean; errors: { path: string; message: string }[] }>(r);
    expect(out.ok).toBe(false);
    expect(out.errors).toEqual([{ path: "nodes[0].retry_count", message: expect.stringContaining(">= 0") }]);
  });

  it("warns about agent types the --agents module does not handle", async () => {
    const ws = workspace();
    const file = ws.file("w.json", { id: "w", nodes: [{ node_id: "a", agent_type: "translator" }] });
    const r = await skein(["validate", file, "--agents", AGENTS], ws.dir);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('warning: nodes[0].agent_type: no agent is registered for agent_type "translator"');
  });

  it("warns about a sleep past the workflow's timeout, naming its path", async () => {
    const ws = workspace();
    const file = ws.file("nap.json", {
      id: "nap",
      timeout: 600,
      nodes: [{ node_id: "nap", agent_type: "sleep", payload: { seconds: 3600 } }],
    });
    const r = await skein(["validate", file], ws.dir);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      "warning: nodes[0].payload.seconds: sleeps 3600 s, at or above the workflow timeout (600 s): the run expires before it wakes; raise the workflow's timeout",
    );
  });

  it("exits 2 for a file that is not JSON, naming the line and column", async () => {
    const ws = workspace();
    const file = ws.file("broken.json", '{\n  "id": "x",\n  "nodes": [ }\n');
    const r = await skein(["validate", file], ws.dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^skein: workflow file .*broken\.json is not valid JSON: .*\(line 3, column 14\)/);
  });

  it("shows schema and graph problems in one answer, with the nearest field for an unknown one", async () => {
    const ws = workspace();
    const file = ws.file("both.json", {
      id: "both",
      nodes: [
        { node_id: "a", agent_type: "echo", depends_on: ["b"], timout: 5 },
        { node_id: "b", agent_type: "echo", depends_on: ["a"] },
      ],
    });
    const r = await skein(["validate", file], ws.dir);
    expect(r.code).toBe(2);
    const lines = r.stdout.trim().split("\n");
    expect(lines).toContain('nodes[0]: unknown field "timout" (did you mean "timeout"?)');
    expect(lines.some((l) => l.startsWith("nodes[0].depends_on[0]: cycle a -> b -> a"))).toBe(true);
  });

  it("refuses a file that JSON.parse would change: invalid UTF-8 (the byte offset), integers beyond 2^53 (the path)", async () => {
    const ws = workspace();
    const latin1 = ws.file("latin1.json", "");
    writeFileSync(latin1, Buffer.concat([Buffer.from('{"id": "caf'), Buffer.from([0xe9]), Buffer.from('"}')]));
    const big = ws.file(
      "big.json",
      '{"id": "x", "nodes": [{"node_id": "a", "agent_type": "echo", "max_visits": 12345678901234567890}]}',
    );
    const [bad, huge] = await Promise.all([skein(["validate", latin1], ws.dir), skein(["validate", big], ws.dir)]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(
      /^skein: workflow file .*latin1\.json is not UTF-8 text: byte 11 \(0xe9\) is not valid UTF-8/,
    );
    expect(huge.code).toBe(2);
    expect(huge.stderr).toContain("nodes[0].max_visits: the integer 12345678901234567890 is outside ±(2^53-1)");
  });

  it("exits 2 for a missing file", async () => {
    const ws = workspace();
    const r = await skein(["validate", "nope.json"], ws.dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("skein: cannot read workflow file nope.json: no such file\n");
  });
});
