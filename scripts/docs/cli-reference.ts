/**
 * docs/cli.md's reference part: the `--help` of every `skein` command, as a user sees it, found by
 * walking the "Commands:" lists from the top. Each help comes from running the CLI from source
 * (`tsx src/cli/main.ts <command> --help`), so the page is the program's own text and cannot drift.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const TSX = fileURLToPath(new URL("../../node_modules/.bin/tsx", import.meta.url));
// Two cores are shared with other work: a few CLIs at a time.
const PARALLEL = 4;

/** The help text of `skein <path...> --help`, without a width that depends on the terminal. */
async function helpOf(path: string[]): Promise<string> {
  // SKEIN_DB (SKEIN_LISTEN_DATABASE) would show as the option's source; the width is commander's default (80).
  const { SKEIN_DB: _db, SKEIN_LISTEN_DATABASE: _listen, ...rest } = process.env;
  const env = { ...rest, NO_COLOR: "1", FORCE_COLOR: "0" };
  const { stdout } = await run(TSX, ["src/cli/main.ts", ...path, "--help"], { cwd: ROOT, env });
  return stdout.trimEnd();
}

/** The names listed under "Commands:" (without `help`). */
function subcommands(help: string): string[] {
  const at = help.indexOf("\nCommands:\n");
  if (at < 0) return [];
  const names: string[] = [];
  for (const line of help.slice(at + "\nCommands:\n".length).split("\n")) {
    if (line.trim() === "") break;
    const m = /^ {2}([a-z][a-z0-9-]*)\b/.exec(line);
    if (m?.[1] && m[1] !== "help") names.push(m[1]);
  }
  return names;
}

export async function cliReference(): Promise<string> {
  const helps = new Map<string, string>([["", await helpOf([])]]);
  // Breadth first, a level's helps a few at a time; then printed depth first.
  let level = subcommands(helps.get("") ?? "").map((name) => [name]);
  while (level.length > 0) {
    const next: string[][] = [];
    for (let i = 0; i < level.length; i += PARALLEL) {
      const batch = level.slice(i, i + PARALLEL);
      const texts = await Promise.all(batch.map(helpOf));
      batch.forEach((path, j) => {
        const help = texts[j] ?? "";
        helps.set(path.join(" "), help);
        for (const name of subcommands(help)) next.push([...path, name]);
      });
    }
    level = next;
  }
  const out: string[] = [];
  const emit = (path: string[]) => {
    const help = helps.get(path.join(" ")) ?? "";
    out.push(`## ${["skein", ...path].join(" ")}`, "", fence(help), "");
    for (const name of subcommands(help)) emit([...path, name]);
  };
  emit([]);
  return out.join("\n");
}

function fence(text: string): string {
  return `\`\`\`text\n${text}\n\`\`\``;
}
