/**
 * The stores every test in test/store runs against, both by default: SQLite (a real file) and
 * PostgreSQL (a fresh schema on the server at SKEIN_TEST_PG_URL, which must be reachable: its tests
 * fail rather than skip). `SKEIN_TEST_STORES=sqlite` (or `postgres`, or `sqlite,postgres`) selects;
 * an unknown name is an error, so a typo never drops a store unnoticed.
 */
import { describe } from "vitest";
import type { Clock } from "../../src/clock.js";
import { openStore } from "../../src/engine/open-store.js";
import { EMPTY_BATCH, type Store, type StoreTx, type WriteBatch, type Written } from "../../src/store/store.js";
import { tempDb } from "../helpers.js";

export type StoreName = "sqlite" | "postgres";

export interface TestStore {
  name: StoreName;
  /** A fresh database (a new file or schema, removed after the test), opened; the caller closes it. */
  open(options?: { clock?: Clock }): Promise<Store>;
}

const ALL: readonly TestStore[] = (["sqlite", "postgres"] as const).map((name) => ({
  name,
  open: (options = {}) => openStore(tempDb(name), options),
}));

function selected(env: string | undefined): readonly TestStore[] {
  if (env === undefined || env.trim() === "") return ALL;
  const names = env.split(",").map((n) => n.trim());
  const unknown = names.filter((n) => !ALL.some((s) => s.name === n));
  if (unknown.length > 0) {
    throw new Error(
      `SKEIN_TEST_STORES names ${unknown.join(", ")}: the stores are ${ALL.map((s) => s.name).join(", ")}`,
    );
  }
  return ALL.filter((s) => names.includes(s.name));
}

/** The stores this test run uses, in order. */
export const STORES: readonly TestStore[] = selected(process.env.SKEIN_TEST_STORES);

/** `describe` for the tests of one store's own behaviour: skipped, and reported so, when SKEIN_TEST_STORES leaves it out. */
export function describeStore(name: StoreName): typeof describe {
  return STORES.some((s) => s.name === name) ? describe : (describe.skip as typeof describe);
}

/** Writes fixture rows through the store's one write path (`StoreTx.write`), each kind of row as the engine writes it. */
export function writeRows(tx: StoreTx, rows: Partial<WriteBatch>): Promise<Written> {
  return tx.write({ ...EMPTY_BATCH, ...rows });
}
