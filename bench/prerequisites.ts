/**
 * What the chosen measurements need from the machine, checked before the first one runs: a full
 * bench takes ten minutes and more, and a missing browser or database would otherwise show only
 * as failures at its end. `npm test` checks its own needs the same way
 * (scripts/test-prerequisites.sh); the bench needs chromium but not faketime, and a PostgreSQL
 * server only for its `pg_*` measurements.
 */
import { existsSync } from "node:fs";
import pg from "pg";
import { CHROMIUM } from "../scripts/chromium.js";
import { PG_URL } from "./postgres.js";

/** A measurement as the bench lists it: its name and the section it writes to. */
export interface Chosen {
  name: string;
  section: string;
}

/**
 * One line per missing prerequisite: what is missing, which measurements need it, how to get it.
 * `where` defaults to what the bench uses (SKEIN_CHROMIUM, BENCH_PG_URL).
 */
export async function missingPrerequisites(
  chosen: readonly Chosen[],
  where: { chromium: string; pgUrl: string } = { chromium: CHROMIUM, pgUrl: PG_URL },
): Promise<string[]> {
  const { chromium, pgUrl } = where;
  const missing: string[] = [];
  const browserTimed = chosen.filter((m) => m.name.startsWith("http_ui_")).map((m) => m.name);
  if (browserTimed.length > 0 && !existsSync(chromium)) {
    missing.push(
      `chromium at ${chromium}, for ${browserTimed.join(", ")} (the admin page's load times): ` +
        "apt-get install -y chromium as root, or set SKEIN_CHROMIUM to a chromium binary",
    );
  }
  const onPostgres = chosen.filter((m) => m.section === "postgres").map((m) => m.name);
  if (onPostgres.length > 0) {
    const problem = await postgresProblem(pgUrl);
    if (problem !== undefined) {
      missing.push(
        `a PostgreSQL server at ${pgUrl} (BENCH_PG_URL), for ${onPostgres.join(", ")}: ${problem}; ` +
          "start one (apt-get install -y postgresql as root; the URL's user needs CREATE on its database) or set BENCH_PG_URL",
      );
    }
  }
  return missing;
}

/** Why the bench's server cannot be used, or undefined when a query answers. */
async function postgresProblem(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return undefined;
  } catch (e) {
    // A refused connection to a name with two addresses is an AggregateError with no message.
    const error = e as Error & { code?: string };
    return error.message || error.code || String(e);
  } finally {
    await client.end().catch(() => {});
  }
}
