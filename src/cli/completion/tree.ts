/**
 * The command tree that completion scripts are generated from: read from the commander program
 * itself (every command, option, argument and choice it declares), so a script cannot drift
 * from the commands. Hidden options are left out; every command takes -h/--help.
 */
import type { Command } from "commander";

export interface OptionSpec {
  /** `--follow` (null for a short-only option). */
  long: string | null;
  /** `-f` (null when it has none). */
  short: string | null;
  /** True when the option takes a value (`--db <url>`). */
  takesValue: boolean;
  /** The values it accepts, when it declares them. */
  choices: readonly string[];
  description: string;
}

export interface CommandSpec {
  /** The words that name it after the program (`["workflows", "put"]`; `[]` for the program). */
  path: string[];
  summary: string;
  /** Its own options (the program's apply everywhere: see `global`). */
  options: OptionSpec[];
  /** The choices of each positional argument, in order (empty when it takes any value). */
  argumentChoices: (readonly string[])[];
  subcommands: string[];
}

const HELP: OptionSpec = { long: "--help", short: "-h", takesValue: false, choices: [], description: "show help" };

/** Words a script may hold without quoting: every name and choice the CLI declares is one. */
const SAFE_WORD = /^[A-Za-z0-9_.:@+=-]+$/;

/** Every command of the program, the program first, parents before children. */
export function commandTree(program: Command): CommandSpec[] {
  const out: CommandSpec[] = [];
  const visit = (command: Command, path: string[]) => {
    out.push({
      path,
      summary: command.summary() || command.description(),
      options: [...command.options.filter((o) => !o.hidden).map(optionSpec), HELP],
      argumentChoices: command.registeredArguments.map((a) => checked(a.argChoices ?? [])),
      subcommands: command.commands.map((c) => checked([c.name()])[0] as string),
    });
    for (const sub of command.commands) visit(sub, [...path, sub.name()]);
  };
  visit(program, []);
  return out;
}

function optionSpec(o: Command["options"][number]): OptionSpec {
  return {
    long: o.long ?? null,
    short: o.short ?? null,
    takesValue: o.required || o.optional,
    choices: checked(o.argChoices ?? []),
    description: o.description,
  };
}

function checked(words: readonly string[]): readonly string[] {
  for (const w of words) {
    if (!SAFE_WORD.test(w)) throw new Error(`completion: "${w}" cannot be completed without quoting; rename it`);
  }
  return words;
}

/** The option's spellings: `--follow`, `-f`. */
export function flagsOf(o: OptionSpec): string[] {
  return [o.long, o.short].filter((f): f is string => f !== null);
}
