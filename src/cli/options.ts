/** What commands share: the global --db option, help examples, and the resume command line. */
import type { Command } from "commander";

export const DEFAULT_DB = "sqlite:./skein.db";

/** The database URL: `--db`, else SKEIN_DB, else the default. */
export function dbOf(command: Command): string {
  return String(command.optsWithGlobals().db ?? DEFAULT_DB);
}

/** The `--help` text after a command's options: its examples. */
export function examples(...lines: string[]): string {
  return `\nExample${lines.length > 1 ? "s" : ""}:\n${lines.map((l) => `  $ ${l}`).join("\n")}\n`;
}

/** The command that picks a run back up, with the flags this one was given. */
export function resumeCommand(command: Command, runId: string, agents: string | undefined): string {
  let root = command;
  while (root.parent) root = root.parent;
  const parts = ["skein", "resume", runId];
  if (root.getOptionValueSource("db") === "cli") parts.push("--db", dbOf(command));
  if (agents !== undefined) parts.push("--agents", agents);
  return parts.map(shellQuote).join(" ");
}

function shellQuote(word: string): string {
  return /^[A-Za-z0-9_\-./:@=+,]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
