/**
 * How the CLI reports: exit codes, `skein: <message>` errors on stderr, JSON and aligned tables
 * on stdout. Loaded at start-up by every command, so it imports nothing heavy.
 */
import { withIsoTimes } from "./json-times.js";

/** Exit codes of every command (DESIGN §10). */
export const EXIT = {
  ok: 0,
  /** The run ended FAILED or CANCELLED, or something unexpected broke. */
  failed: 1,
  /**
   * Bad input: an invalid file, unknown run or workflow, bad flags, a refused database, a broken
   * agents module, a request the run's state refuses (a conflict: a review already decided, a
   * finished run cancelled), a reviewer who is not among the assignees.
   */
  badInput: 2,
  /** Stopped by SIGINT or SIGTERM. */
  interrupted: 130,
} as const;

/** An error the CLI itself raises: its message says what to do; printed as `skein: <message>`. */
export class CliError extends Error {
  override readonly name = "CliError";
  constructor(
    message: string,
    readonly exitCode: number = EXIT.badInput,
  ) {
    super(message);
  }
}

/** Library error codes (SkeinError.code) that mean the caller's input was wrong. */
const BAD_INPUT_CODES = new Set(["validation", "not_found", "conflict", "forbidden", "database"]);

/** Prints an error as `skein: <message>` and returns the exit code it deserves. */
export function reportError(e: unknown): number {
  if (e instanceof CliError) {
    process.stderr.write(`skein: ${e.message}\n`);
    return e.exitCode;
  }
  const code = (e as { code?: unknown } | null)?.code;
  const message = e instanceof Error ? e.message : String(e);
  if (typeof code === "string" && BAD_INPUT_CODES.has(code)) {
    process.stderr.write(`skein: ${message}\n`);
    return EXIT.badInput;
  }
  const stack = process.env.SKEIN_DEBUG && e instanceof Error ? `\n${e.stack}` : " (set SKEIN_DEBUG=1 for the stack)";
  process.stderr.write(`skein: ${message}${stack}\n`);
  return EXIT.failed;
}

/** 0 for a SUCCEEDED run, 1 for FAILED or CANCELLED. */
export function exitCodeForStatus(status: string): number {
  return status === "SUCCEEDED" ? EXIT.ok : EXIT.failed;
}

/** Pretty JSON, with an ISO 8601 time beside each epoch-ms one (json-times.ts). */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(withIsoTimes(value), null, 2)}\n`);
}

/** One JSON line (`skein events --json`), with the ISO times too. */
export function jsonLine(value: unknown): string {
  return JSON.stringify(withIsoTimes(value));
}

export function println(line = ""): void {
  process.stdout.write(`${line}\n`);
}

export function warn(message: string): void {
  process.stderr.write(`skein: warning: ${message}\n`);
}

/** Columns padded to their widest cell; the last column is not padded. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

/** `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 03 min`. */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "-";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
}

/** An epoch-ms timestamp as ISO 8601 (UTC). */
export function formatTime(ms: number | null): string {
  return ms === null ? "-" : new Date(ms).toISOString();
}

/** One line of at most `max` characters (newlines folded). */
export function oneLine(text: string, max = 80): string {
  const flat = text.replace(/\s*\n\s*/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
