/** `skein --help`, every command's help (with an example), and usage errors (exit 2). */
import { describe, expect, it } from "vitest";
import { requireBuiltCli, skein, workspace } from "./helpers.js";

requireBuiltCli();

const COMMANDS = [
  "validate",
  "graph",
  "run",
  "resume",
  "engine",
  "start",
  "status",
  "list",
  "events",
  "reviews",
  "review",
  "cancel",
  "retry",
  "bulk",
  "send",
  "workflows",
  "schedules",
  "serve",
  "worker",
  "mcp",
  "completion",
];

describe("skein help and usage", () => {
  it("lists every command with exit code 0", async () => {
    const r = await skein(["--help"], workspace().dir);
    expect(r.code).toBe(0);
    for (const c of COMMANDS) expect(r.stdout).toMatch(new RegExp(`^  ${c} `, "m"));
    expect(r.stdout).toContain("--db <url>");
    expect(r.stdout).toContain("SKEIN_DB");
  });

  it("gives every command a description and an example, and shows the global --db", async () => {
    const dir = workspace().dir;
    const helps = await Promise.all(
      [...COMMANDS, "workflows put", ...["show", "put", "pause", "resume", "delete"].map((c) => `schedules ${c}`)].map(
        (c) => skein([...c.split(" "), "--help"], dir),
      ),
    );
    helps.forEach((r, i) => {
      expect(r.code, COMMANDS[i]).toBe(0);
      expect(r.stdout).toMatch(/Examples?:\n {2}\$ skein /);
      expect(r.stdout).toContain("--db <url>");
    });
  });

  it("exits 2 with `skein: ...` on stderr for an unknown command, an unknown option or a missing argument", async () => {
    const dir = workspace().dir;
    const [command, option, argument, choice] = await Promise.all([
      skein(["frobnicate"], dir),
      skein(["list", "--colour"], dir),
      skein(["validate"], dir),
      skein(["list", "--status", "DONE"], dir),
    ]);
    expect(command.code).toBe(2);
    expect(command.stderr).toMatch(/^skein: unknown command 'frobnicate'/);
    expect(option.code).toBe(2);
    expect(option.stderr).toMatch(/^skein: unknown option '--colour'/);
    expect(argument.code).toBe(2);
    expect(argument.stderr).toMatch(/^skein: missing required argument 'file'/);
    expect(choice.code).toBe(2);
    expect(choice.stderr).toContain("Allowed choices are QUEUED, RUNNING");
  });

  it("prints the package version", async () => {
    const r = await skein(["--version"], workspace().dir);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });
});
