/**
 * A terminated PostgreSQL connection never crashes the host process (issue 14 item 2): the
 * server terminates (`pg_terminate_backend`, as a failover or an idle-session timeout does)
 * every connection of a child process over and over for several seconds, while the child
 * serves runs with one engine and opens and closes clients and engines in a loop. Connections
 * idle in the pool, checked out between statements, listening, or migrating all get the FATAL
 * (57P01); none may be an unhandled `'error'` event. The child stays alive and every run it
 * started finishes.
 */
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { Child, type Message, within } from "../fixtures/child.js";
import { PG_URL } from "../helpers.js";

const CHILD = fileURLToPath(new URL("../fixtures/pg-terminate-child.ts", import.meta.url));
/** How long the child opens and closes clients and engines while its connections are cut. */
const FAULT_MS = 6000;

const children: Child[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
});

describe("PostgreSQL connections terminated while clients and engines open and close", () => {
  it("never crash the process, and every run finishes", async () => {
    const schema = `skein_termc_${randomBytes(4).toString("hex")}`;
    // application_name marks the child's connections, so only they are terminated.
    const url = `${PG_URL}?schema=${schema}&application_name=${schema}`;
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      const child = new Child(CHILD, [url, String(FAULT_MS)]);
      children.push(child);
      await child.waitFor("ready", (m) => m.type === "ready");

      let terminated = 0;
      let rounds = 0;
      let stop = false;
      const roundsDone = () => child.messages.some((m) => m.type === "rounds");
      // Terminate every connection of the child, again and again, until it has done its rounds.
      const terminating = (async () => {
        while (!stop && child.proc.exitCode === null && !roundsDone()) {
          const { rows } = await admin.query<{ ok: boolean }>(
            "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1",
            [schema],
          );
          terminated += rows.filter((r) => r.ok).length;
          rounds += 1;
          // The fault's pace (a failover every 200 ms), not a wait for anything. Faster, a slow or
          // busy machine can no longer commit a transaction between two cuts (connecting and
          // committing take longer), so storage stays down and the engine answers Unavailable, as it
          // should, and the child's rounds never end: at 100 ms it failed here on the commit before
          // issue 32's as on the one after it (a shared VM under CPU pressure), at 50 ms earlier.
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      })();
      try {
        await within(
          90_000,
          "the child's rounds",
          child.waitFor("rounds", (m) => m.type === "rounds"),
        );
      } finally {
        stop = true;
        await terminating;
      }
      const done = (await within(
        60_000,
        "the end of every run",
        child.waitFor("done", (m) => m.type === "done"),
      )) as Message & { statuses: Record<string, number>; retried: number };

      // The scenario happened: many connections were cut, while clients and engines were opened
      // and closed more than once (how many rounds fit in the fault's time depends on the
      // machine: a round waits out storage the engine counts as down).
      const childRounds = (child.messages.find((m) => m.type === "rounds") as Message & { rounds: number }).rounds;
      expect(childRounds).toBeGreaterThan(1);
      expect(rounds).toBeGreaterThan(20);
      expect(terminated).toBeGreaterThan(20);
      // The child never died, and each of its 3 runs a round succeeded.
      expect(child.proc.exitCode).toBeNull();
      expect(child.proc.signalCode).toBeNull();
      expect(done.statuses).toEqual({ SUCCEEDED: childRounds * 3 });
    } finally {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await admin.end();
    }
  }, 180_000);
});
