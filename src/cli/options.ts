/** What commands share: the global --db option, help examples, and the resume command line. */
import { type Command, InvalidArgumentError } from "commander";

export const DEFAULT_DB = "sqlite:./skein.db";

/** The help of every run id argument: abbreviations are accepted (run-ids.ts). */
export const RUN_ID_HELP = "the run: its id, or a unique start or end of it (at least 4 characters)";

/** The database URL: `--db`, else SKEIN_DB, else the default. */
export function dbOf(command: Command): string {
  return String(command.optsWithGlobals().db ?? DEFAULT_DB);
}

/**
 * PostgreSQL behind a pooler (DESIGN §8): the direct connection `--listen-database`, else
 * SKEIN_LISTEN_DATABASE, names. Read from the command line before each command's action
 * (main.ts), so that every command that opens the database passes it on (`listenDatabaseOption`).
 */
let listenDatabase: string | undefined;

/** Takes the command line's listen database: main.ts calls it before the action runs. */
export function takeListenDatabase(command: Command): void {
  const given = command.optsWithGlobals().listenDatabase;
  listenDatabase = given === undefined ? undefined : String(given);
}

/** `{ listenDatabase }` for createEngine and createClient when one was given, else nothing. */
export function listenDatabaseOption(): { listenDatabase?: string } {
  return listenDatabase === undefined ? {} : { listenDatabase };
}

/** The `--help` text after a command's options: its examples. */
export function examples(...lines: string[]): string {
  return `\nExample${lines.length > 1 ? "s" : ""}:\n${lines.map((l) => `  $ ${l}`).join("\n")}\n`;
}

/** The database when given as `--db` (commands printed for the user to type repeat it), else undefined. */
export function explicitDb(command: Command): string | undefined {
  let root = command;
  while (root.parent) root = root.parent;
  return root.getOptionValueSource("db") === "cli" ? dbOf(command) : undefined;
}

/** The command that picks a run back up, with the flags this one was given. */
export function resumeCommand(command: Command, runId: string, agents: string | undefined): string {
  const parts = ["skein", "resume", runId];
  const db = explicitDb(command);
  if (db !== undefined) parts.push("--db", db);
  if (db !== undefined && listenDatabase !== undefined) parts.push("--listen-database", listenDatabase);
  if (agents !== undefined) parts.push("--agents", agents);
  return parts.map(shellQuote).join(" ");
}

/**
 * The command that decides a review, for the live view: `skein review <run> <node>
 * approve|reject --by <first assignee>` (no --by when anyone may decide), with `--db` (and `--listen-database`) when given.
 */
export function reviewCommand(runId: string, nodeId: string, assignee: string | null, db: string | undefined): string {
  const parts = ["skein", "review", runId, nodeId].map(shellQuote);
  parts.push("approve|reject");
  if (assignee !== null) parts.push("--by", shellQuote(assignee));
  if (db !== undefined) parts.push("--db", shellQuote(db));
  if (db !== undefined && listenDatabase !== undefined) parts.push("--listen-database", shellQuote(listenDatabase));
  return parts.join(" ");
}

export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_\-./:@=+,]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * A repeatable `--tag name=value` (run tags, DESIGN §16), collected into one object: the value is
 * all after the first `=`. The names and values are checked by the engine.
 */
export function collectTag(pair: string, tags: Record<string, string> = {}): Record<string, string> {
  const at = pair.indexOf("=");
  if (at <= 0) throw new InvalidArgumentError("expected name=value, e.g. --tag customer=acme.");
  return { ...tags, [pair.slice(0, at)]: pair.slice(at + 1) };
}

/**
 * `--priority N` (DESIGN §17): a whole number from 0, claimed first, to 9, claimed last. Checked
 * here so that a typo is told as the flag it came from, not as the engine's `priority`.
 */
export function parsePriority(text: string): number {
  if (!/^[0-9]$/.test(text.trim())) {
    throw new InvalidArgumentError(
      "expected a whole number from 0 (claimed first) to 9 (claimed last), e.g. --priority 1.",
    );
  }
  return Number(text);
}
