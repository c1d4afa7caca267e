/**
 * JSON nested far too deep, in every place the CLI reads JSON (a workflow file, `--input` text
 * and `@file`, `--payload`): a precise error with the path and the limit, exit 2 as for any bad
 * input, never a stack overflow (JSON.parse builds such a value, what reads it next recursed); the
 * same for a template expression nested too deep for JSONata's parser.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AGENTS, requireBuiltCli, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

/** `levels` arrays, one inside the other. */
const nested = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;
/** The path of level 65 under `base`: 64 levels of `[0]` below the document. */
const deepPath = (base: string) => `${base}${"[0]".repeat(64 - base.split(/[.[]/).filter(Boolean).length)}`;

describe("deeply nested JSON in the CLI", () => {
  it("a workflow file 100,000 levels deep: validate and run exit 2 with the path and the limit", async () => {
    const ws = workspace();
    const file = ws.file(
      "deep.json",
      `{"id":"deep","nodes":[{"node_id":"a","agent_type":"echo","payload":{"x":${nested(100_000)}}}]}`,
    );
    const [validate, run] = await Promise.all([
      skein(["validate", file], ws.dir),
      skein(["run", file, "--agents", AGENTS, "--db", `sqlite:${join(ws.dir, "a.db")}`], ws.dir),
    ]);
    for (const r of [validate, run]) {
      expect(r.code).toBe(2);
      expect(r.stderr).not.toMatch(/Maximum call stack/);
      expect(r.stderr).toContain(`skein: workflow file ${file} nests deeper than 64 levels:\n`);
      expect(r.stderr).toContain(
        `  nodes[0].payload.x${"[0]".repeat(60)}: this value is level 65 of nested objects and arrays, past the limit of 64; flatten the data, or send a part that deep as a JSON string`,
      );
    }
  });

  it("a template 3,000 levels deep: validate and run exit 2 with the path and the limit", async () => {
    const ws = workspace();
    const deep = `{{ ${"(".repeat(3000)}1${")".repeat(3000)} }}`;
    const chain = `{{ ${Array(20_000).fill("1").join("+")} }}`;
    const file = ws.file(
      "deep-template.json",
      JSON.stringify({ id: "deep", nodes: [{ node_id: "a", agent_type: "echo", payload: { x: deep, y: chain } }] }),
    );
    const [validate, run] = await Promise.all([
      skein(["validate", file], ws.dir),
      skein(["run", file, "--agents", AGENTS, "--db", `sqlite:${join(ws.dir, "a.db")}`], ws.dir),
    ]);
    for (const r of [validate, run]) {
      expect(r.code).toBe(2);
      // The problems go to stdout (validate) or stderr (run).
      const said = `${r.stdout}${r.stderr}`;
      expect(said).not.toMatch(/Maximum call stack/);
      expect(said).toContain(
        "nodes[0].payload.x: the expression nests 3000 levels of brackets, past the limit of 64; split it into smaller templates",
      );
      expect(said).toContain(
        "nodes[0].payload.y: the expression (39999 characters) chains too many operators or conditions to parse",
      );
    }
  });

  it("--input (text and @file) and --payload 50,000 levels deep exit 2 naming the flag", async () => {
    const ws = workspace();
    const small = ws.file("small.json", WORKFLOWS.small);
    // One command-line argument may hold at most 128 KiB on Linux: 50,000 levels is 100 KB.
    const text = `{"topic":${nested(50_000)}}`;
    const file = ws.file("input.json", `{"topic":${nested(100_000)}}`);
    const [inline, fromFile, payload] = await Promise.all([
      // Each its own database: the JSON is refused before any is opened.
      skein(["run", small, "--agents", AGENTS, "--db", `sqlite:${join(ws.dir, "a.db")}`, "--input", text], ws.dir),
      skein(
        ["run", small, "--agents", AGENTS, "--db", `sqlite:${join(ws.dir, "b.db")}`, "--input", `@${file}`],
        ws.dir,
      ),
      skein(["send", "some-run", "go", "--payload", nested(50_000), "--db", `sqlite:${join(ws.dir, "c.db")}`], ws.dir),
    ]);
    for (const [r, what, path] of [
      [inline, "--input", "topic"],
      [fromFile, `--input file ${file}`, "topic"],
      [payload, "--payload", ""],
    ] as const) {
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(
        `skein: ${what} nests deeper than 64 levels:\n  ${deepPath(path)}: this value is level 65`,
      );
    }
  });
});
