/**
 * The fish completion script (`skein completion fish | source`, or saved as
 * ~/.config/fish/completions/skein.fish): one `complete` line per command, option and choice,
 * each with its help text as the description.
 */
import { type CommandSpec, flagsOf, type OptionSpec } from "./tree.js";

/** A fish single-quoted string. */
const quote = (text: string) => `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

/** The condition under which a command's words apply: its path has been typed, and no subcommand of it. */
function condition(c: CommandSpec): string {
  const seen = c.path.map((w) => `__fish_seen_subcommand_from ${w}`);
  const notDeeper = c.subcommands.length > 0 ? [`not __fish_seen_subcommand_from ${c.subcommands.join(" ")}`] : [];
  if (c.path.length === 0) return "__fish_use_subcommand";
  return [...seen, ...notDeeper].join("; and ");
}

function optionLine(o: OptionSpec, when: string | null): string {
  const parts = ["complete -c skein"];
  if (when !== null) parts.push("-n", quote(when));
  for (const flag of flagsOf(o)) parts.push(flag.startsWith("--") ? `-l ${flag.slice(2)}` : `-s ${flag.slice(1)}`);
  if (o.takesValue) parts.push("-r");
  if (o.choices.length > 0) parts.push("-f -a", quote(o.choices.join(" ")));
  parts.push("-d", quote(oneLine(o.description)));
  return parts.join(" ");
}

const oneLine = (text: string) => text.replace(/\s+/g, " ").trim();

export function fishScript(tree: CommandSpec[]): string {
  const lines = [
    "# skein completion for fish. Load it with:  skein completion fish | source",
    "# Generated from the commands.",
  ];
  const byPath = new Map(tree.map((c) => [c.path.join(" "), c]));
  for (const c of tree) {
    const when = condition(c);
    for (const sub of c.subcommands) {
      const summary = byPath.get([...c.path, sub].join(" "))?.summary ?? "";
      lines.push(`complete -c skein -n ${quote(when)} -f -a ${sub} -d ${quote(oneLine(summary))}`);
    }
    // The program's options apply to every command: no condition.
    for (const o of c.options) lines.push(optionLine(o, c.path.length === 0 ? null : when));
    const choices = [...new Set(c.argumentChoices.flat())];
    if (choices.length > 0) lines.push(`complete -c skein -n ${quote(when)} -f -a ${quote(choices.join(" "))}`);
  }
  return `${lines.join("\n")}\n`;
}
