/**
 * The typed API's own tests: the type-test files compile under --strict exactly as their
 * `@ts-expect-error` lines say, the workflows that compile are accepted at run time, and the
 * package's declarations export every type their signatures name and ship nothing `@internal`.
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import ts from "typescript";
import { beforeAll, describe, expect, it } from "vitest";
import { validateWorkflow } from "../../src/index.js";
import { distPath, emitDeclarations, internalLeft, unexportedTypes } from "./declarations.js";
import * as passing from "./define-workflow.pass.js";

const HERE = import.meta.dirname;
const FILES = ["define-workflow.pass.ts", "define-workflow.fail.ts", "define-agent.pass.ts"].map((f) => join(HERE, f));
const FAIL = join(HERE, "define-workflow.fail.ts");
// Type-checking src/ and emitting its declarations take seconds each on a busy machine, and so does
// each check of the declarations (a program over them and the types they import: 40 s seen on a
// machine 2.5x slower).
const SLOW = 180_000;

/** The project's compiler options, --strict, no output. */
function options(): ts.CompilerOptions {
  const config = ts.readConfigFile(join(HERE, "../../tsconfig.json"), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, join(HERE, "../.."));
  return { ...parsed.options, strict: true, noEmit: true };
}

/**
 * Diagnostics of `files`, with `replace` standing in for some files' text, as `file:line: message`.
 * Only these files are checked: src/ is `npm run typecheck`'s (checking it whole again here cost a
 * minute of CPU per program on a busy machine); the checker reads of src what these files use.
 */
function typeCheck(files: string[], replace: Map<string, string> = new Map()): string[] {
  const host = ts.createCompilerHost(options());
  const getSourceFile = host.getSourceFile;
  host.getSourceFile = (name, language, ...rest) => {
    const text = replace.get(resolve(name));
    return text === undefined ? getSourceFile(name, language, ...rest) : ts.createSourceFile(name, text, language);
  };
  const program = ts.createProgram(files, options(), host);
  const checked = files.map((f) => program.getSourceFile(f) as ts.SourceFile);
  const diagnostics = [
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...checked.flatMap((f) => [...program.getSyntacticDiagnostics(f), ...program.getSemanticDiagnostics(f)]),
  ];
  return diagnostics.map((d) => {
    const where = d.file ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}` : "";
    return `${where}: ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`;
  });
}

const directive = (line: string) => line.trimStart().startsWith("// @ts-expect-error");
let undirected: string[] | null = null;

/** The errors of the fail file without its `@ts-expect-error` lines (checked once, for two tests). */
function undirectedErrors(): string[] {
  const stripped = readFileSync(FAIL, "utf8")
    .split("\n")
    .map((line) => (directive(line) ? "" : line))
    .join("\n");
  undirected ??= typeCheck([FAIL], new Map([[FAIL, stripped]]));
  return undirected;
}

describe("type tests", () => {
  it(
    "compile under --strict: every mistake is refused, every correct use accepted (an unused @ts-expect-error fails too)",
    () => {
      expect(typeCheck(FILES)).toEqual([]);
    },
    SLOW,
  );

  it(
    "each @ts-expect-error of the fail file stands before a line the compiler refuses",
    () => {
      // Without the directives every one of their lines must have an error: this is what makes
      // the check above able to fail (a compiler that accepted everything would pass it).
      const lines = readFileSync(FAIL, "utf8").split("\n");
      const expected = lines.flatMap((line, i) => (directive(line) ? [i + 2] : []));
      const errors = undirectedErrors();
      const lineOf = (e: string) => Number(e.slice(FAIL.length + 1, e.indexOf(": ")));
      expect(errors.every((e) => e.startsWith(`${FAIL}:`))).toBe(true);
      expect(expected.length).toBeGreaterThan(30);
      expect(expected.filter((line) => !errors.some((e) => lineOf(e) === line))).toEqual([]);
    },
    SLOW,
  );

  it(
    "names a built-in kind's unknown payload field in the error, not `never` on every value",
    () => {
      // A marker in the fail file: `// @ts-expect-error <field> is not a field of <kind>'s payload`.
      const lines = readFileSync(FAIL, "utf8").split("\n");
      const marker = /^\s*\/\/ @ts-expect-error (\S+ is not a field of \S+'s payload)/;
      const expected = lines.flatMap((line, i) => {
        const m = marker.exec(line);
        return m ? [{ line: i + 2, says: m[1] as string }] : [];
      });
      expect(expected.length).toBeGreaterThanOrEqual(6);
      // A line's errors do not depend on the directives of others: the file without any is checked once.
      const errors = undirectedErrors();
      for (const { line, says } of expected) {
        const there = errors.filter((e) => e.startsWith(`${FAIL}:${line}: `));
        expect(there.join("\n"), `line ${line}`).toContain(`"${says}"`);
        expect(there.join("\n"), `line ${line}`).not.toContain("'never'");
      }
    },
    SLOW,
  );

  it("accepts at run time every workflow its types accept", () => {
    const workflows = Object.entries(passing);
    expect(workflows.length).toBeGreaterThan(5);
    for (const [name, definition] of workflows) {
      const result = validateWorkflow(definition);
      expect({ name, errors: result.errors }).toEqual({ name, errors: [] });
    }
  });
});

describe("the package's declarations (as npm run build writes them)", () => {
  let files: Map<string, string>;
  beforeAll(() => {
    files = emitDeclarations();
  }, SLOW);

  it(
    "export every type a signature of `skein` names",
    () => {
      expect(unexportedTypes(files, distPath("index.d.ts"))).toEqual([]);
    },
    SLOW,
  );

  it(
    "export every type a signature of `skein/http` names (or `skein` does)",
    () => {
      expect(unexportedTypes(files, distPath("http/server.d.ts"), [distPath("index.d.ts")])).toEqual([]);
    },
    SLOW,
  );

  it(
    "export every type a signature of `skein/client` names, and of `skein/react` (or `skein/client` does)",
    () => {
      expect(unexportedTypes(files, distPath("client/index.d.ts"))).toEqual([]);
      expect(unexportedTypes(files, distPath("react/index.d.ts"), [distPath("client/index.d.ts")])).toEqual([]);
    },
    SLOW,
  );

  it("ship nothing marked @internal", () => {
    expect(internalLeft(files)).toEqual([]);
    const engine = files.get(distPath("engine/engine.d.ts")) ?? "";
    // Internal members are gone, and `new Engine()` does not compile.
    expect(engine).toContain("private constructor();");
    expect(engine).not.toMatch(/\bstatic over\b|\bretention\b|\bstart\(\): Promise<void>/);
  });
});
