/**
 * `skein graph`: Mermaid text of a workflow file or of a run. Labels are escaped, so hostile
 * text (a `when` condition, an error message, a node id) can never become Mermaid syntax.
 */
import { describe, expect, it } from "vitest";
import { escapeLabel, graphModel, renderMermaid } from "../../src/definition/mermaid.js";
import { validateWorkflow } from "../../src/index.js";
import { AGENTS, requireBuiltCli, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

const LABEL = "[A-Za-z0-9 _.,:#;-]*";
/** Every line Mermaid output may contain: anything else (a directive, a click, a stray quote) fails. */
const GRAMMAR = [
  /^flowchart TD$/,
  new RegExp(`^  n\\d+\\["${LABEL}(<br/>${LABEL})*"\\]$`),
  new RegExp(`^  n\\d+ (-->|-\\.->)(\\|"${LABEL}"\\|)? n\\d+$`),
  /^ {2}classDef [a-z_]+ [a-z0-9:#,. -]+$/,
  /^ {2}class n\d+(,n\d+)* [a-z_]+$/,
  /^ {2}linkStyle \d+(,\d+)* stroke-width:3px$/,
];

function expectOnlyMermaidGrammar(text: string): void {
  for (const line of text.trimEnd().split("\n")) {
    expect(
      GRAMMAR.some((g) => g.test(line)),
      `unexpected line: ${JSON.stringify(line)}`,
    ).toBe(true);
  }
}

/** The labels' text, entity codes decoded. */
function labels(text: string): string[] {
  return [...text.matchAll(/"([^"]*)"/g)].map((m) =>
    (m[1] ?? "").replace(/#(\d+);/g, (_, code: string) => String.fromCodePoint(Number(code))),
  );
}

const HOSTILE = {
  quote: `"]; click n0 callback`,
  init: "%%{init: {}}%%",
  script: "<script>alert(1)</script>",
};

describe("skein graph", () => {
  it("draws depends_on and forward edges solid, with ok/fail/when labels, and loop-backs dashed", async () => {
    const ws = workspace();
    const file = ws.file("loop.json", {
      id: "loop",
      nodes: [
        { node_id: "draft", agent_type: "echo" },
        {
          node_id: "review",
          agent_type: "echo",
          depends_on: ["draft"],
          next_on_success: [{ when: "output.ok = true", to: "publish" }, { to: "draft" }],
        },
        { node_id: "publish", agent_type: "echo", next_on_failure: "alert" },
        { node_id: "alert", agent_type: "echo" },
        { node_id: "done", agent_type: "echo", depends_on: ["publish"], next_on_success: "finish" },
        { node_id: "finish", agent_type: "echo" },
      ],
    });
    const r = await skein(["graph", file], ws.dir);
    expect(r.code).toBe(0);
    expectOnlyMermaidGrammar(r.stdout);
    expect(r.stdout).toContain('  n0["draft<br/>echo"]');
    expect(r.stdout).toContain("  n0 --> n1\n");
    expect(r.stdout).toContain('  n1 -->|"output.ok #61; true"| n2\n');
    expect(r.stdout).toContain('  n1 -.->|"ok"| n0\n');
    expect(r.stdout).toContain('  n2 -->|"fail"| n3\n');
    expect(r.stdout).toContain('  n4 -->|"ok"| n5\n');
    expect(r.stdout).not.toContain("classDef"); // no run, no states
  });

  it("escapes hostile `when` text: no directive, click or raw quote escapes a label", async () => {
    const ws = workspace();
    const file = ws.file("hostile.json", {
      id: "hostile",
      nodes: [
        {
          node_id: "start",
          agent_type: "echo",
          next_on_success: [
            { when: `output.x = '${HOSTILE.quote}'`, to: "a" },
            { when: `output.y = '${HOSTILE.init}'\nor output.z = '${HOSTILE.script}'`, to: "b" },
            { to: "b" },
          ],
        },
        { node_id: "a", agent_type: "echo" },
        { node_id: "b", agent_type: "echo" },
      ],
    });
    const r = await skein(["graph", file], ws.dir);
    expect(r.code).toBe(0);
    expectOnlyMermaidGrammar(r.stdout);
    for (const raw of Object.values(HOSTILE)) expect(r.stdout).not.toContain(raw);
    expect(r.stdout).not.toContain("%%");
    expect(r.stdout).not.toContain("<script");
    // The text survives, escaped: Mermaid shows it as written.
    expect(labels(r.stdout)).toContain(`output.x = '${HOSTILE.quote}'`);
    expect(labels(r.stdout)).toContain(`output.y = '${HOSTILE.init}'\nor output.z = '${HOSTILE.script}'`);
  });

  it("refuses a hostile node id (exit 2) and prints no Mermaid", async () => {
    const ws = workspace();
    const file = ws.file("bad-id.json", {
      id: "bad-id",
      nodes: [{ node_id: `${HOSTILE.quote}${HOSTILE.init}`, agent_type: "echo" }],
    });
    const r = await skein(["graph", file], ws.dir);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("nodes[0].node_id: must be 1 to 64 letters");
  });

  it("shows a run: states as classes, the taken path thick, the failure's message escaped", async () => {
    const ws = workspace();
    const message = `${HOSTILE.quote}\n${HOSTILE.init}${HOSTILE.script}`;
    const definition = {
      ...WORKFLOWS.failing,
      nodes: WORKFLOWS.failing.nodes.map((n) => (n.node_id === "b" ? { ...n, payload: { message } } : n)),
    };
    const run = await skein(["run", ws.file("f.json", definition), "--agents", AGENTS, "--db", ws.db], ws.dir);
    expect(run.code).toBe(1);
    const runId = run.stdout.match(/^run (\S+) started$/m)?.[1] as string;
    const r = await skein(["graph", runId, "--db", ws.db], ws.dir);
    expect(r.code).toBe(0);
    expectOnlyMermaidGrammar(r.stdout);
    expect(r.stdout).toContain("  class n0 succeeded\n");
    expect(r.stdout).toContain("  class n1 failed\n");
    expect(r.stdout).toContain("  class n2 skipped\n");
    expect(r.stdout).toMatch(/^ {2}classDef skipped .*opacity/m);
    // Edge 0 (a -> b: a succeeded) is on the path; edge 1 (b -> c: b failed) is not.
    expect(r.stdout).toContain("  linkStyle 0 stroke-width:3px");
    for (const raw of Object.values(HOSTILE)) expect(r.stdout).not.toContain(raw);
    // The message, on one line and shortened, is in b's label as written.
    expect(labels(r.stdout).some((l) => l.includes(`${HOSTILE.quote} ${HOSTILE.init}<script>`))).toBe(true);
  });

  it("exits 2 for an unknown run id", async () => {
    const ws = workspace();
    await skein(["workflows", "put", ws.file("s.json", WORKFLOWS.small), "--db", ws.db], ws.dir);
    const r = await skein(["graph", "no-such-run", "--db", ws.db], ws.dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^skein: run no-such-run does not exist in (sqlite|postgres):.*; skein list shows the runs/,
    );
  });
});

describe("Mermaid rendering", () => {
  it("keeps any id and label inside its quotes, whatever the characters", () => {
    const ids = [`a"]; click n0 callback`, "%%{init: {'theme':'dark'}}%%", "x\ny --> z", "end", "🚀#;&amp;"];
    const text = renderMermaid({
      nodes: ids.map((id) => ({ id, lines: [id, `<b>${id}</b>`], state: "SUCCEEDED" })),
      edges: ids.slice(1).map((to, i) => ({ from: ids[i] as string, to, style: "solid", label: to, taken: true })),
    });
    expectOnlyMermaidGrammar(text);
    expect(labels(text).slice(0, ids.length)).toEqual(ids.map((id) => `${id}<br/><b>${id}</b>`));
    expect(escapeLabel(`"#\n`)).toBe("#34;#35;#10;");
    expect(escapeLabel("🚀")).toBe("#128640;");
  });

  it("labels edges of plain lists `ok` and of cases by their condition", () => {
    const result = validateWorkflow({
      id: "w",
      nodes: [
        { node_id: "a", agent_type: "x", next_on_success: ["b", "c"] },
        { node_id: "b", agent_type: "x" },
        { node_id: "c", agent_type: "x", next_on_failure: ["d"] },
        { node_id: "d", agent_type: "x", next_on_success: [{ when: "output.again", to: "d" }, { to: "a" }] },
      ],
    });
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    const model = graphModel(result.graph);
    expect(model.edges).toEqual([
      { from: "a", to: "b", style: "solid", label: "ok", taken: false },
      { from: "a", to: "c", style: "solid", label: "ok", taken: false },
      { from: "c", to: "d", style: "solid", label: "fail", taken: false },
      { from: "d", to: "d", style: "dashed", label: "output.again", taken: false },
      { from: "d", to: "a", style: "dashed", label: "ok", taken: false },
    ]);
  });
});
