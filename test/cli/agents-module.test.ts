/**
 * `skein run`'s agents module and input, refused or loaded: what a user gets wrong (an unknown
 * workflow, input that is not JSON, missing agents, a module that fails to load) exits 2 naming
 * the problem, and a TypeScript module outside an ESM package or one compiled to CommonJS loads.
 * Runs on SQLite only (vitest.config.ts): none of it reaches the store. CI runs it on Node 22
 * too: loading TypeScript through tsx is what differs by runtime.
 */
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AGENTS, json, ROOT, requireBuiltCli, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

describe("skein run: agents modules and input", () => {
  it("exits 2 for bad input: an unknown workflow, input that is not JSON, an invalid file, a missing input file", async () => {
    const ws = workspace();
    const file = ws.file("small.json", WORKFLOWS.small);
    const invalid = ws.file("invalid.json", {
      id: "x",
      nodes: [{ node_id: "a", agent_type: "echo", depends_on: ["b"] }],
    });
    const [unknown, notJson, invalidFile, missing] = await Promise.all([
      skein(["run", "nope", "--agents", AGENTS, "--db", ws.db], ws.dir),
      skein(
        ["run", file, "--agents", AGENTS, "--db", `sqlite:${join(ws.dir, "a.db")}`, "--input", "{topic:1}"],
        ws.dir,
      ),
      skein(["run", invalid, "--agents", AGENTS, "--db", `sqlite:${join(ws.dir, "b.db")}`], ws.dir),
      skein(
        ["run", file, "--agents", AGENTS, "--db", `sqlite:${join(ws.dir, "c.db")}`, "--input", "@none.json"],
        ws.dir,
      ),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^skein: workflow "nope" is not registered/);
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toMatch(/^skein: --input is not valid JSON: .*\(line 1, column 2\)/);
    const big = await skein(
      [
        "run",
        file,
        "--agents",
        AGENTS,
        "--db",
        `sqlite:${join(ws.dir, "d.db")}`,
        "--input",
        '{"id": 9007199254740993}',
      ],
      ws.dir,
    );
    expect(big.code).toBe(2);
    expect(big.stderr).toContain("--input has values that cannot be kept as sent:\n  id: the integer 9007199254740993");
    expect(invalidFile.code).toBe(2);
    expect(invalidFile.stderr).toContain('nodes[0].depends_on[0]: unknown node "b"');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe("skein: cannot read --input file none.json: no such file\n");
  });

  it("exits 2 when agents are missing for the workflow's agent types, naming them", async () => {
    const ws = workspace();
    const file = ws.file("small.json", WORKFLOWS.small);
    writeFileSync(join(ws.dir, "partial.mjs"), "export default { echo: () => 1 };\n");
    const [none, partial] = await Promise.all([
      skein(["run", file, "--db", ws.db], ws.dir),
      skein(["run", file, "--agents", "partial.mjs", "--db", `sqlite:${join(ws.dir, "p.db")}`], ws.dir),
    ]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('needs agents for "echo" (node a), "flaky" (node b), "slow" (node c): pass --agents');
    expect(partial.code).toBe(2);
    expect(partial.stderr).toContain('agents module partial.mjs has no handler for "flaky" (node b), "slow" (node c)');
  });

  it("exits 2 for an agents module that fails to load or exports no handlers, naming the file and the problem", async () => {
    const ws = workspace();
    const file = ws.file("small.json", WORKFLOWS.small);
    const modules: Record<string, string> = {
      "throws.mjs": 'throw new Error("cannot reach the vault");\n',
      "no-default.mjs": "export const version = 1;\n",
      "not-object.js": "export default () => 1;\n",
      "not-functions.mjs": 'export default { echo: "echo" };\n',
      "empty.mjs": "export default {};\n",
      "syntax.ts": "export default { echo: (t: number) => t, };\nconst x: = 1;\n",
    };
    for (const [name, text] of Object.entries(modules)) writeFileSync(join(ws.dir, name), text);
    const results = await Promise.all(
      [...Object.keys(modules), "missing.ts", "agents.txt"].map((m) =>
        skein(["run", file, "--agents", m, "--db", ws.db], ws.dir),
      ),
    );
    const stderr = results.map((r) => r.stderr.trim());
    for (const r of results) expect(r.code).toBe(2);
    expect(stderr).toEqual([
      "skein: agents module throws.mjs failed to load: cannot reach the vault",
      expect.stringMatching(
        /^skein: agents module no-default\.mjs has no default export nor exported functions; write export default \{/,
      ),
      expect.stringMatching(/^skein: agents module not-object\.js: the default export must be an object/),
      expect.stringMatching(/^skein: agents module not-functions\.mjs: the handlers of "echo" are not functions/),
      expect.stringMatching(/^skein: agents module empty\.mjs exports no handlers/),
      expect.stringMatching(/^skein: agents module syntax\.ts failed to load: .*Unexpected "="/s),
      "skein: agents module missing.ts does not exist",
      "skein: agents module agents.txt: expected a .js, .mjs or .ts file",
    ]);
  });

  it("loads a .ts agents module outside an ESM package: no package.json, or one without type module", async () => {
    const workflow = { id: "greet", nodes: [{ node_id: "a", agent_type: "greet" }] };
    // TypeScript only, a relative import without extension, and `export default` (CommonJS to tsx here).
    const helper = 'export const greeting: string = "hello";\n';
    const agents =
      'import { greeting } from "./helper";\nexport default { greet: async (t: { input: { who: string } }) => ({ text: greeting + " " + t.input.who }) };\n';
    const bare = workspace(); // a temp directory: no package.json above it
    const plain = workspace();
    writeFileSync(join(plain.dir, "package.json"), JSON.stringify({ name: "plain", version: "1.0.0" }));
    for (const ws of [bare, plain]) {
      writeFileSync(join(ws.dir, "helper.ts"), helper);
      writeFileSync(join(ws.dir, "agents.ts"), agents);
      writeFileSync(
        join(ws.dir, "tla.ts"),
        'const g = await Promise.resolve("x");\nexport default { greet: () => ({ g }) };\n',
      );
    }
    const runs = await Promise.all(
      [bare, plain].map((ws) =>
        skein(
          [
            "run",
            ws.file("greet.json", workflow),
            "--agents",
            "./agents.ts",
            "--db",
            ws.db,
            "--input",
            '{"who":"ada"}',
            "--json",
          ],
          ws.dir,
        ),
      ),
    );
    for (const r of runs) {
      expect(r.stderr).not.toMatch(/agents module/);
      expect(r.code).toBe(0);
      expect(json<{ status: string; output: unknown }>(r)).toMatchObject({
        status: "SUCCEEDED",
        output: { a: { text: "hello ada" } },
      });
    }
    // What CommonJS cannot hold (top-level await, an import of skein) fails naming the way out.
    const tla = await skein(["run", join(bare.dir, "greet.json"), "--agents", "./tla.ts", "--db", bare.db], bare.dir);
    expect(tla.code).toBe(2);
    expect(tla.stderr).toMatch(/^skein: agents module \.\/tla\.ts failed to load: .*Top-level await/s);
    expect(tla.stderr).toContain('name it .mts, or add "type": "module" to its package.json');
    const skeinDir = join(plain.dir, "node_modules", "skein");
    mkdirSync(join(plain.dir, "node_modules"));
    symlinkSync(ROOT, skeinDir);
    writeFileSync(
      join(plain.dir, "imports.ts"),
      'import { defineAgent } from "skein";\nexport default { greet: defineAgent(async () => 1) };\n',
    );
    const imports = await skein(["run", "greet.json", "--agents", "./imports.ts", "--db", plain.db], plain.dir);
    expect(imports.code).toBe(2);
    expect(imports.stderr).toContain(
      'CommonJS cannot import an ES module only package such as skein: outside an ESM package a .ts file is compiled as CommonJS: name it .mts, or add "type": "module" to its package.json',
    );
  });

  it("loads an agents module compiled to CommonJS (tsc's exports.default), or its exported functions, in a CommonJS package", async () => {
    const workflow = { id: "greet", nodes: [{ node_id: "a", agent_type: "greet" }] };
    const ws = workspace();
    writeFileSync(join(ws.dir, "package.json"), JSON.stringify({ name: "plain", version: "1.0.0" }));
    const modules: Record<string, string> = {
      // What tsc writes for `export default { greet }` with "module": "commonjs".
      "compiled.js":
        '"use strict";\nObject.defineProperty(exports, "__esModule", { value: true });\nexports.default = { greet: async (t) => ({ by: "compiled", who: t.input.who }) };\n',
      // No default export: the exported functions are the handlers (CommonJS to tsx here).
      "named.ts":
        'export const greet = async (t: { input: { who: string } }) => ({ by: "named", who: t.input.who });\n',
      "named.mjs": 'export const greet = async (t) => ({ by: "named-esm", who: t.input.who });\n',
    };
    for (const [name, text] of Object.entries(modules)) writeFileSync(join(ws.dir, name), text);
    const file = ws.file("greet.json", workflow);
    const runs = [];
    for (const m of Object.keys(modules)) {
      runs.push(
        await skein(["run", file, "--agents", `./${m}`, "--db", ws.db, "--input", '{"who":"ada"}', "--json"], ws.dir),
      );
    }
    for (const r of runs) {
      expect(r.stderr).not.toMatch(/agents module/);
      expect(r.code).toBe(0);
    }
    expect(runs.map((r) => json<{ output: unknown }>(r).output)).toEqual([
      { a: { by: "compiled", who: "ada" } },
      { a: { by: "named", who: "ada" } },
      { a: { by: "named-esm", who: "ada" } },
    ]);
  });
});
