/** Reading JSON from files and flags, with errors that point at the problem (exit 2). */
import { existsSync, readFileSync } from "node:fs";
import { ValidationError } from "../errors.js";
import { MAX_JSON_DEPTH, parseJsonText } from "../json-text.js";
import { CliError } from "./output.js";

/** True when a command argument names a workflow file rather than a workflow or run id. */
export function looksLikeFile(arg: string): boolean {
  return arg.endsWith(".json") || existsSync(arg);
}

/** Reads and parses a JSON file, strictly (src/json-text.ts). @throws CliError naming the file and the problem */
export function readJsonFile(path: string, what: string): unknown {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    const reason = (e as { code?: string }).code === "ENOENT" ? "no such file" : (e as Error).message;
    throw new CliError(`cannot read ${what} ${path}: ${reason}`);
  }
  return parseJson(bytes, `${what} ${path}`);
}

/**
 * The value of `--input`: JSON text, or `@path` to read a JSON file; `{}` when absent.
 * @throws CliError when the text or the file is not JSON
 */
export function parseInputOption(value: string | undefined): unknown {
  if (value === undefined) return {};
  return parseJsonOption(value, "--input");
}

/**
 * The value of a JSON flag (`--input`, `--output`): JSON text, or `@path` to read a JSON file.
 * @throws CliError naming the flag when the text or the file is not JSON
 */
export function parseJsonOption(value: string, flag: string): unknown {
  if (value.startsWith("@")) return readJsonFile(value.slice(1), `${flag} file`);
  return parseJson(value, flag);
}

/**
 * Parses JSON text strictly: refused (never silently changed) when it is not UTF-8, has an
 * integer beyond 2^53, a `__proto__` key, or nests deeper than the HTTP API allows (64 levels:
 * deeper would overflow the stack of what reads it next); every problem with its path.
 * @throws CliError (exit 2) naming the text and each problem
 */
export function parseJson(text: string | Buffer, what: string): unknown {
  try {
    return parseJsonText(text, { what, maxDepth: MAX_JSON_DEPTH });
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    // "--input is not valid JSON", then each problem (one at the document itself reads as one sentence).
    const head = (e.message.split("\n")[0] ?? "").replace(/:$/, "");
    const [first, ...more] = e.problems;
    if (first && more.length === 0 && first.path === "") throw new CliError(`${head}: ${first.message}`);
    const lines = e.problems.map((p) => `  ${p.path === "" ? "(the document)" : p.path}: ${p.message}`);
    throw new CliError(`${head}:\n${lines.join("\n")}`);
  }
}
