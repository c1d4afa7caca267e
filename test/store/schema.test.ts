import { readFileSync, writeFileSync } from "node:fs";
import Database from "better-sqlite3";
import { expect, it } from "vitest";
import { migrate } from "../../src/store/sqlite/migrate.js";
import { describeStore } from "./stores.js";

// The committed schema makes every schema change visible in review.
// After changing a migration on purpose: UPDATE_SCHEMA=1 npx vitest run test/store/schema.test.ts
const SCHEMA_FILE = new URL("./sqlite-schema.sql", import.meta.url);

function dump(db: Database.Database): string {
  const rows = db
    .prepare(
      "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type DESC, name",
    )
    .all() as { sql: string }[];
  return `${rows.map((r) => `${r.sql};`).join("\n\n")}\n`;
}

describeStore("sqlite")("SQLite schema", () => {
  it("matches the committed schema dump", () => {
    const db = new Database(":memory:");
    migrate(db, ":memory:");
    const schema = dump(db);
    db.close();
    if (process.env.UPDATE_SCHEMA) writeFileSync(SCHEMA_FILE, schema);
    expect(schema, "the schema changed: review it, then regenerate test/store/sqlite-schema.sql").toBe(
      readFileSync(SCHEMA_FILE, "utf8"),
    );
  });

  it("migrating twice changes nothing", () => {
    const db = new Database(":memory:");
    migrate(db, ":memory:");
    const once = dump(db);
    migrate(db, ":memory:");
    expect(dump(db)).toBe(once);
    expect(db.prepare("SELECT version, name FROM skein_migrations").all()).toEqual([
      { version: 1, name: "init" },
      { version: 2, name: "compensations" },
      { version: 3, name: "waiting" },
      { version: 4, name: "children" },
      { version: 5, name: "inbox" },
      { version: 6, name: "map" },
      { version: 7, name: "prune" },
      { version: 8, name: "limits" },
      { version: 9, name: "revision" },
      { version: 10, name: "schedules" },
      { version: 11, name: "usage" },
      { version: 12, name: "run_text" },
      { version: 13, name: "run_text_batches" },
      { version: 14, name: "scope_engine_keys" },
      { version: 15, name: "bounded_work" },
      { version: 16, name: "reserved" },
      { version: 17, name: "held_maps" },
      { version: 18, name: "served_types" },
      { version: 20, name: "event_batches" },
      { version: 21, name: "item_attempts" },
      { version: 22, name: "steps" },
      { version: 23, name: "thread_steps" },
      { version: 24, name: "run_tags" },
      { version: 25, name: "run_pause" },
      { version: 26, name: "run_forked_from" },
      { version: 27, name: "priority" },
      { version: 28, name: "run_keys" },
      { version: 29, name: "triggers" },
      { version: 30, name: "token_rates" },
    ]);
    db.close();
  });
});
