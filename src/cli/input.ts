/** Reading JSON from files and flags, with errors that point at the problem (exit 2). */
import { existsSync, readFileSync } from "node:fs";
import { CliError } from "./output.js";

/** True when a command argument names a workflow file rather than a workflow or run id. */
export function looksLikeFile(arg: string): boolean {
  return arg.endsWith(".json") || existsSync(arg);
}

/** Reads and parses a JSON file. @throws CliError naming the file and the problem */
export function readJsonFile(path: string, what: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    const reason = (e as { code?: string }).code === "ENOENT" ? "no such file" : (e as Error).message;
    throw new CliError(`cannot read ${what} ${path}: ${reason}`);
  }
  return parseJson(text, `${what} ${path}`);
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

/** JSON.parse with the failing line and column added to the message. */
export function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    // Node 20 quotes the text itself in some messages ("..." is not valid JSON): the position says it better.
    const message = (e as Error).message.replace(/, (\.\.\.)?".*" is not valid JSON$/s, "");
    const at = /position (\d+)/.exec(message);
    const position = at ? Number(at[1]) : errorPosition(text);
    throw new CliError(`${what} is not valid JSON: ${message} (${lineColumn(text, position)})`);
  }
}

/**
 * Where JSON.parse fails, for the messages of Node 20 that give no position ("Unexpected token
 * ']', ... is not valid JSON"): the end of the shortest prefix that fails before its own end
 * (a prefix that only runs out of text is a good one).
 */
function errorPosition(text: string): number {
  const failsInside = (length: number) => {
    try {
      JSON.parse(text.slice(0, length));
      return false;
    } catch (e) {
      const message = (e as Error).message;
      const at = /position (\d+)/.exec(message);
      return at ? Number(at[1]) < length : !message.includes("end of JSON input");
    }
  };
  if (!failsInside(text.length)) return text.length;
  let low = 0;
  let high = text.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (failsInside(mid)) high = mid;
    else low = mid + 1;
  }
  return Math.max(0, low - 1);
}

function lineColumn(text: string, position: number): string {
  const before = text.slice(0, position);
  const line = before.split("\n").length;
  const column = position - before.lastIndexOf("\n");
  return `line ${line}, column ${column}`;
}
