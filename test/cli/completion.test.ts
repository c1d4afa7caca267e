/**
 * `skein completion bash|zsh|fish`: the bash script is loaded into a real bash and asked, through
 * COMP_WORDS/COMP_CWORD as bash's completion machinery sets them, for the words of partial
 * command lines; zsh and fish are checked by syntax when the shell exists, else by their text.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { CLI, requireBuiltCli, skein, workspace } from "./helpers.js";

requireBuiltCli();

const hasShell = (shell: string) => spawnSync("sh", ["-c", `command -v ${shell}`]).status === 0;

/** The words bash's completion offers for `line` (the last word is the one being completed, maybe ""). */
function complete(words: string[][]): string[] {
  const probes = words
    .map((w) => {
      const quoted = w.map((x) => `'${x}'`).join(" ");
      return `COMP_WORDS=(${quoted}); COMP_CWORD=${w.length - 1}; COMPREPLY=(); _skein; echo "\${COMPREPLY[*]}"`;
    })
    .join("\n");
  const script = `source <("${process.execPath}" "${CLI}" completion bash)\ncomplete -p skein\n${probes}\n`;
  return execFileSync("bash", ["--norc", "--noprofile", "-c", script], { encoding: "utf8" }).split("\n");
}

/** The commands `skein --help` lists. */
async function helpCommands(): Promise<string[]> {
  const help = (await skein(["--help"], workspace().dir)).stdout;
  const section = help.slice(help.indexOf("Commands:"));
  return [...section.matchAll(/^ {2}([a-z][a-z-]*)\b/gm)].map((m) => m[1] as string).filter((c) => c !== "help");
}

describe("skein completion", () => {
  it("bash: registers the function, then completes commands, options, choices and nested commands", async () => {
    const [registered, ...answers] = complete([
      ["skein", "ev"],
      ["skein", "st"],
      ["skein", "events", "abcd", "--f"],
      ["skein", "--db", "sqlite:x.db", "re"],
      ["skein", "review", "abcd", "approval", "ap"],
      ["skein", "list", "--status", "F"],
      ["skein", "workflows", "p"],
      ["skein", "workflows", "put", "--a"],
      ["skein", "completion", ""],
      ["skein", "status", "--json", "ab"],
      ["skein", "schedules", "p"],
    ]);
    expect(registered).toBe("complete -o default -F _skein skein");
    expect(answers.slice(0, 11)).toEqual([
      "events",
      "start status",
      "--follow",
      "resume reviews review retry",
      "approve",
      "FAILED",
      "put",
      "--agents",
      "bash zsh fish",
      "", // a run id: nothing declared (bash falls back to file names)
      "put pause",
    ]);
  });

  it("bash: offers every command --help lists, and every option of a command", async () => {
    const commands = await helpCommands();
    expect(commands).toContain("completion");
    const [, all, runOptions] = complete([
      ["skein", ""],
      ["skein", "run", "--"],
    ]);
    expect((all ?? "").split(" ").sort()).toEqual([...commands].sort());
    expect((runOptions ?? "").split(" ")).toEqual(
      expect.arrayContaining(["--input", "--agents", "--json", "--help", "--db"]),
    );
  });

  it("zsh and fish: scripts for every command (a syntax check where the shell exists)", async () => {
    const dir = workspace().dir;
    const [zsh, fish, bad] = await Promise.all([
      skein(["completion", "zsh"], dir),
      skein(["completion", "fish"], dir),
      skein(["completion", "tcsh"], dir),
    ]);
    expect(zsh.code).toBe(0);
    expect(zsh.stdout).toMatch(/^#compdef skein\n/);
    expect(zsh.stdout).toContain("bashcompinit");
    expect(zsh.stdout).toContain("complete -o default -F _skein skein");
    expect(fish.code).toBe(0);
    for (const c of await helpCommands()) {
      expect(fish.stdout).toMatch(new RegExp(`^complete -c skein -n '__fish_use_subcommand' -f -a ${c} -d '`, "m"));
    }
    expect(fish.stdout).toContain(
      "complete -c skein -n '__fish_seen_subcommand_from events' -l follow -s f -d 'after the history, print new events",
    );
    expect(fish.stdout).toMatch(/^complete -c skein -l db -r -d 'database: sqlite:<path>.*postgres:\/\//m);
    expect(fish.stdout).toContain("complete -c skein -n '__fish_seen_subcommand_from review' -f -a 'approve reject'");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/Allowed choices are bash, zsh, fish/);
    if (hasShell("zsh")) expect(spawnSync("zsh", ["-n"], { input: zsh.stdout }).status).toBe(0);
    if (hasShell("fish")) expect(spawnSync("fish", ["-n"], { input: fish.stdout }).status).toBe(0);
  });
});
