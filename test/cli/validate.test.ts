/** `skein validate`: every problem with its path (exit 2), warnings, JSON output, unreadable files. */
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
    // The schema's problems come first; fix the id and the graph's problems are all listed.
    expect(r.stdout).toMatch(/^id: must be 1 to 64 lowercase letters/m);
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

  it("exits 2 for a file that is not JSON, naming the line and column", async () => {
    const ws = workspace();
    const file = ws.file("broken.json", '{\n  "id": "x",\n  "nodes": [ }\n');
    const r = await skein(["validate", file], ws.dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^skein: workflow file .*broken\.json is not valid JSON: .*\(line 3, column 14\)/);
  });

  it("exits 2 for a missing file", async () => {
    const ws = workspace();
    const r = await skein(["validate", "nope.json"], ws.dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("skein: cannot read workflow file nope.json: no such file\n");
  });
});
