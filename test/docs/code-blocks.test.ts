/**
 * Every ```ts / ```typescript / ```tsx block of README.md and docs/*.md type-checks with --strict
 * against the package's own source ("skein" is src/index.ts, "skein/http" is src/http/server.ts,
 * "skein/ai-sdk" is src/ai-sdk/index.ts, "skein/client" and "skein/react" their src/ folders; a
 * tsx block with React's JSX), so the docs cannot rot. Each block is a module of its own (top-level
 * await works, names do not clash), compiled in memory as if it were a file beside the docs; one
 * report names every failing block by file and line.
 *
 * Conventions for writing a block:
 * - A block may use functions and values of the reader's own program: declare them in the block
 *   (`declare function fetchPlatform(platform: string): Promise<string[]>;`) when seeing them helps
 *   the reader, or in a hidden preamble: an HTML comment right before the fence,
 *       <!-- ts-preamble
 *       declare const agents: Record<string, AgentHandler>;
 *       -->
 *   whose text is put before the block (import what it names from "skein" inside it if needed).
 * - `<!-- ts-skip: why -->` right before the fence leaves a block out (say why; prefer a preamble).
 * - Packages the docs tell users to install, which this repository does not depend on, are
 *   declared as untyped modules (OPTIONAL_PACKAGES below).
 * - A fragment that is not a whole program (a shape, a signature) is better written as ```text.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { type CodeBlock, readMarkdown } from "./markdown.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const OPTIONAL_PACKAGES = [
  "@opentelemetry/exporter-metrics-otlp-http",
  "@opentelemetry/exporter-trace-otlp-http",
  "@opentelemetry/sdk-node",
];
// The virtual files live beside the docs so that module resolution finds node_modules and the
// package's "type": "module" (ESM, top-level await).
const VIRTUAL_DIR = join(ROOT, "test", "docs", "__blocks__");

interface Checked {
  name: string;
  source: string;
  block: CodeBlock;
  /** Lines the preamble adds before the block's first line. */
  offset: number;
}

function docsFiles(): string[] {
  const docs = readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`);
  return ["README.md", ...docs];
}

/** The blocks to check of `files` (paths relative to `root`), each with its preamble. */
function blocksToCheck(files = docsFiles(), root = ROOT): Checked[] {
  const out: Checked[] = [];
  for (const file of files) {
    for (const block of readMarkdown(join(root, file)).blocks) {
      if (block.lang !== "ts" && block.lang !== "typescript" && block.lang !== "tsx") continue;
      if (block.comment?.startsWith("<!-- ts-skip")) continue;
      const preamble = block.comment?.startsWith("<!-- ts-preamble")
        ? block.comment
            .replace(/^<!-- ts-preamble/, "")
            .replace(/-->$/, "")
            .trim()
        : "";
      const head = preamble ? `${preamble}\n` : "";
      const name = join(
        VIRTUAL_DIR,
        `${file.replace(/[/.]/g, "_")}_${block.line}.${block.lang === "tsx" ? "tsx" : "ts"}`,
      );
      out.push({ name, source: `${head}${block.code}\nexport {};\n`, block, offset: head.split("\n").length - 1 });
    }
  }
  return out;
}

function typeCheck(blocks: Checked[]): Map<Checked, string[]> {
  const ambient = join(VIRTUAL_DIR, "optional-packages.d.ts");
  const files = new Map<string, string>(blocks.map((b) => [b.name, b.source]));
  files.set(ambient, OPTIONAL_PACKAGES.map((p) => `declare module "${p}";`).join("\n"));
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    esModuleInterop: true,
    resolveJsonModule: true,
    types: ["node"],
    jsx: ts.JsxEmit.ReactJSX,
    baseUrl: ROOT,
    paths: {
      skein: ["src/index.ts"],
      "skein/http": ["src/http/server.ts"],
      "skein/ai-sdk": ["src/ai-sdk/index.ts"],
      "skein/client": ["src/client/index.ts"],
      "skein/react": ["src/react/index.ts"],
    },
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, language, onError, create) => {
    const text = files.get(name);
    return text !== undefined
      ? ts.createSourceFile(name, text, language)
      : getSourceFile(name, language, onError, create);
  };
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => files.has(name) || fileExists(name);
  const readFile = host.readFile.bind(host);
  host.readFile = (name) => files.get(name) ?? readFile(name);
  const program = ts.createProgram([...files.keys()], options, host);
  const byName = new Map(blocks.map((b) => [b.name, b]));
  const problems = new Map<Checked, string[]>();
  // The blocks' (and the shim's) own diagnostics: the package's source is `npm run typecheck`'s to
  // check whole, and checking it again here cost most of this file's minute of CPU.
  const own = [...files.keys()].flatMap((name) => {
    const file = program.getSourceFile(name);
    return file ? [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)] : [];
  });
  for (const d of [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics(), ...own]) {
    const block = d.file ? byName.get(d.file.fileName) : undefined;
    const message = ts.flattenDiagnosticMessageText(d.messageText, "\n  ");
    if (!block || !d.file || d.start === undefined) {
      // A diagnostic outside the blocks (the options, the shim) fails every run: show it.
      const where = d.file ? `${d.file.fileName}` : "(no file)";
      const key = blocks[0];
      if (key) problems.set(key, [...(problems.get(key) ?? []), `outside the blocks: ${where}: ${message}`]);
      continue;
    }
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
    // The fence is block.line; the block's first line is the one after it.
    const docLine = block.block.line + 1 + (line - block.offset);
    problems.set(block, [...(problems.get(block) ?? []), `line ${docLine}:${character + 1}: ${message}`]);
  }
  return problems;
}

function docName(b: Checked): string {
  const base = b.name.slice(VIRTUAL_DIR.length + 1).replace(/_\d+\.tsx?$/, "");
  return base.replace(/_md$/, ".md").replace(/^docs_/, "docs/");
}

describe("TypeScript blocks in README.md and docs/", () => {
  it("type-check with --strict against the package's source", { timeout: 120_000 }, () => {
    const blocks = blocksToCheck();
    expect(blocks.length).toBeGreaterThan(0);
    const problems = typeCheck(blocks);
    const report = [...problems]
      .sort(([a], [b]) => docName(a).localeCompare(docName(b)) || a.block.line - b.block.line)
      .map(([b, lines]) => `${docName(b)}, block at line ${b.block.line}:\n${lines.map((l) => `  ${l}`).join("\n")}`)
      .join("\n");
    // Thrown rather than asserted: an assertion's message would be cut short.
    if (problems.size > 0) throw new Error(`${problems.size} of ${blocks.length} blocks fail:\n${report}`);
  });

  it("reports a block that does not type-check, at its line", () => {
    const block: CodeBlock = { lang: "ts", code: 'const n: number = "text";', line: 10, comment: null };
    const checked: Checked = {
      name: join(VIRTUAL_DIR, "README_md_10.ts"),
      source: `${block.code}\nexport {};\n`,
      block,
      offset: 0,
    };
    const problems = typeCheck([checked]);
    expect(problems.get(checked)?.[0]).toMatch(/^line 11:7: Type 'string' is not assignable to type 'number'/);
  });

  it("puts a block's hidden preamble before it, leaves out skipped blocks, and reports lines of the page", () => {
    const dir = mkdtempSync(join(tmpdir(), "skein-blocks-"));
    try {
      const page = [
        "# Page",
        "",
        "<!-- ts-preamble",
        "declare function lookup(id: string): Promise<number>;",
        "-->",
        "```ts",
        'const n: number = await lookup("a");',
        'const s: string = await lookup("b");',
        "```",
        "",
        "<!-- ts-skip: not a whole program -->",
        "```ts",
        "this is not TypeScript",
        "```",
        "",
      ].join("\n");
      writeFileSync(join(dir, "page.md"), page);
      const blocks = blocksToCheck(["page.md"], dir);
      expect(blocks.map((b) => b.block.line)).toEqual([6]);
      const problems = typeCheck(blocks);
      expect(problems.get(blocks[0] as Checked)).toEqual([
        "line 8:7: Type 'number' is not assignable to type 'string'.",
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
