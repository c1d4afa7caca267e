/**
 * Opening SQLite files Skein cannot use (issue 14 items 8 and 9): each is refused with a
 * DatabaseError that names the path and says what to do, and nothing is changed in a file that
 * is not Skein's. The same cases through the CLI are in test/cli/sqlite-files.test.ts.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { createClient, createEngine, DatabaseError, type Engine } from "../../src/index.js";
import { bytes, foreignDatabase, garblePages, journalMode, literal, makeReadOnly } from "../fixtures/sqlite-files.js";
import { describeSqlite, tempDir } from "../helpers.js";

const WORKFLOW = { id: "one", nodes: [{ node_id: "a", agent_type: "echo" }] };

const opened: Engine[] = [];
const undo: (() => void)[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((e) => e.close({ timeoutMs: 100 })));
  for (const u of undo.splice(0).reverse()) u();
});

async function refusal(open: Promise<Engine>): Promise<Error> {
  const result = await open.then(
    (engine) => {
      opened.push(engine);
      return null;
    },
    (e: unknown) => e,
  );
  expect(result).toBeInstanceOf(DatabaseError);
  return result as Error;
}

/** A Skein database with one workflow and three runs, closed. */
async function skeinDatabase(path: string): Promise<void> {
  const client = await createClient({ database: `sqlite:${path}` });
  try {
    await client.registerWorkflow(WORKFLOW);
    for (let i = 0; i < 3; i++) await client.startRun(WORKFLOW.id, { input: { i } });
  } finally {
    await client.close();
  }
}

describeSqlite("opening another application's SQLite file", () => {
  it("is refused by engines and clients, and the file keeps its journal mode and every byte", async () => {
    const dir = tempDir();
    const path = join(dir, "other.db");
    foreignDatabase(path);
    const before = bytes(path);
    expect(journalMode(path)).toBe("delete");

    for (const open of [createEngine, createClient]) {
      const error = await refusal(open({ database: `sqlite:${path}` }));
      expect(error.message).toBe(
        `${path} is a SQLite database but not a Skein one (it has tables customers); ` +
          "Skein left it unchanged: use a new file for Skein",
      );
    }
    expect(journalMode(path)).toBe("delete");
    expect(bytes(path).equals(before)).toBe(true);
    // No write-ahead log, no engine lock: nothing of Skein's beside it either.
    expect(readdirSync(dir)).toEqual(["other.db"]);
  });
});

describeSqlite("SQLite files Skein cannot use", () => {
  it("names a missing directory and says to create it", async () => {
    const dir = join(tempDir(), "no", "such");
    const path = join(dir, "skein.db");
    for (const open of [createEngine, createClient]) {
      const error = await refusal(open({ database: `sqlite:${path}` }));
      expect(error.message).toBe(
        `cannot open ${path}: the directory ${dir} does not exist; create it (mkdir -p ${dir}) or use another path`,
      );
    }
    expect(existsSync(join(dir, ".."))).toBe(false);
  });

  it("refuses to write a read-only file, naming it, while clients still read it; nothing is lost", async () => {
    const path = join(tempDir(), "skein.db");
    await skeinDatabase(path);
    undo.push(makeReadOnly(path));

    const error = await refusal(createEngine({ database: `sqlite:${path}`, agents: { echo: () => "hi" } }));
    expect(error.message).toMatch(new RegExp(`^${literal(path)} is read-only \\(.*\\); make the file writable`));

    const client = await createClient({ database: `sqlite:${path}` });
    opened.push(client);
    expect(await client.listRuns({})).toHaveLength(3);
    const write = await client.startRun(WORKFLOW.id).catch((e: unknown) => e);
    expect(write).toBeInstanceOf(DatabaseError);
    expect((write as Error).message).toMatch(new RegExp(`^${literal(path)} is read-only`));
    expect(await client.listRuns({})).toHaveLength(3);
  });

  it("says a read-only directory cannot hold a new database", async () => {
    const dir = tempDir();
    const path = join(dir, "skein.db");
    undo.push(makeReadOnly(dir));
    const error = await refusal(createEngine({ database: `sqlite:${path}` }));
    expect(error.message).toMatch(
      new RegExp(`^cannot open ${literal(path)}: its directory ${literal(dir)} is not writable`),
    );
  });

  it("names a file corrupt beyond its header when it is opened", async () => {
    const path = join(tempDir(), "skein.db");
    await skeinDatabase(path);
    garblePages(path, { from: 2 });
    for (const open of [createEngine, createClient]) {
      const error = await refusal(open({ database: `sqlite:${path}` }));
      expect(error.message).toMatch(
        new RegExp(`^${literal(path)} is corrupt \\(.*\\); stop every process using it and restore it from a backup`),
      );
    }
  });

  it("names the file when a read finds corruption after it opened", async () => {
    const path = join(tempDir(), "skein.db");
    await skeinDatabase(path);
    garblePages(path, { table: "runs" });
    const client = await createClient({ database: `sqlite:${path}` });
    opened.push(client);
    const error = await client.listRuns({}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseError);
    expect((error as Error).message).toMatch(new RegExp(`^${literal(path)} is corrupt \\(.*\\); stop every process`));
  });
});
