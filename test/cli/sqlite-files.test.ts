/**
 * SQLite files the CLI cannot use (issue 14 items 8 and 9): exit 2 with `skein: <message>`
 * naming the path and saying what to do; another application's file is left exactly as it was.
 * The same cases through the library are in test/engine/sqlite-files.test.ts.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { bytes, foreignDatabase, garblePages, journalMode, literal, makeReadOnly } from "../fixtures/sqlite-files.js";
import { onPostgres } from "../helpers.js";
import { AGENTS, requireBuiltCli, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

const undo: (() => void)[] = [];
afterEach(() => {
  for (const u of undo.splice(0).reverse()) u();
});

/** A Skein database at `path` with the small workflow and two runs started. */
async function skeinDatabase(ws: ReturnType<typeof workspace>, path: string): Promise<void> {
  const db = ["--db", `sqlite:${path}`];
  expect((await skein(["workflows", "put", ws.file("s.json", WORKFLOWS.small), ...db], ws.dir)).code).toBe(0);
  for (let i = 0; i < 2; i++) expect((await skein(["start", "small", ...db], ws.dir)).code).toBe(0);
}

describe.skipIf(onPostgres)("SQLite files the CLI cannot use", () => {
  it("refuses another application's file and leaves its journal mode and bytes unchanged", async () => {
    const ws = workspace();
    const path = join(ws.dir, "other.db");
    foreignDatabase(path);
    const before = bytes(path);
    for (const args of [["list"], ["engine", "--agents", AGENTS]]) {
      const result = await skein([...args, "--db", `sqlite:${path}`], ws.dir);
      expect(result.code).toBe(2);
      expect(result.stderr).toBe(
        `skein: ${path} is a SQLite database but not a Skein one (it has tables customers); ` +
          "Skein left it unchanged: use a new file for Skein\n",
      );
    }
    expect(journalMode(path)).toBe("delete");
    expect(bytes(path).equals(before)).toBe(true);
    expect(readdirSync(ws.dir).filter((f) => f.startsWith("other.db"))).toEqual(["other.db"]);
  });

  it("names a missing directory", async () => {
    const ws = workspace();
    const dir = join(ws.dir, "missing");
    const path = join(dir, "skein.db");
    const result = await skein(
      ["workflows", "put", ws.file("s.json", WORKFLOWS.small), "--db", `sqlite:${path}`],
      ws.dir,
    );
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      `skein: cannot open ${path}: the directory ${dir} does not exist; create it (mkdir -p ${dir}) or use another path\n`,
    );
    const list = await skein(["list", "--db", `sqlite:${path}`], ws.dir);
    expect(list.code).toBe(2);
    expect(list.stderr).toBe(
      `skein: no database at ${path}: the directory ${dir} does not exist; pass --db sqlite:<path> (or set SKEIN_DB) to use another file\n`,
    );
  });

  it("lists a read-only database but refuses to write it, naming the file", async () => {
    const ws = workspace();
    const path = join(ws.dir, "ro.db");
    await skeinDatabase(ws, path);
    undo.push(makeReadOnly(path));
    const db = ["--db", `sqlite:${path}`];
    const list = await skein(["list", "--json", ...db], ws.dir);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toHaveLength(2);
    for (const args of [
      ["start", "small"],
      ["engine", "--agents", AGENTS],
    ]) {
      const result = await skein([...args, ...db], ws.dir);
      expect(result.code).toBe(2);
      // (The client's dispatcher also logs the failed transaction as a JSON line.)
      expect(result.stderr).toMatch(
        new RegExp(`^skein: ${literal(path)} is read-only \\(.*\\); make the file writable`, "m"),
      );
    }
  });

  it("names a corrupt file, whether the damage is found on opening or by a later read", async () => {
    const ws = workspace();
    const whole = join(ws.dir, "whole.db");
    await skeinDatabase(ws, whole);
    garblePages(whole, { from: 2 });
    const runs = join(ws.dir, "runs.db");
    await skeinDatabase(ws, runs);
    garblePages(runs, { table: "runs" });
    for (const path of [whole, runs]) {
      const result = await skein(["list", "--db", `sqlite:${path}`], ws.dir);
      expect(result.code).toBe(2);
      // (The client's dispatcher may log its failed transaction as a JSON line first: its first
      // transaction indexes the runs' queued text, migration 013, and so reads the runs.)
      expect(result.stderr).toMatch(
        new RegExp(
          `^skein: ${literal(path)} is corrupt \\(.*\\); stop every process using it and restore it from a backup`,
          "m",
        ),
      );
    }
  });
});
