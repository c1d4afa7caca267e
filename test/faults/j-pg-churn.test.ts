/**
 * Case j (issue 14 item 2): one process runs an engine and, in a loop, opens a client, starts a
 * run with it and closes it, while the server terminates the process's connections at random
 * moments (pg_terminate_backend: a failover, an idle-session timeout). The process must never
 * die: a FATAL that arrives between the pool handing out a client and its user attaching a
 * listener is a retryable error of that work, not an unhandled 'error' event.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import pg from "pg";
import { expect, it } from "vitest";
import { computeOracles, readHistory, readOutcome, reportLine } from "./oracles.js";
import { acknowledged, caseRng, engineProcess, faultDir, faultMoment, PG_URL, pgDatabase, pollUntil } from "./setup.js";
import { FAN } from "./workflows.js";

const CLIENTS = 400;

it("j: connections terminated while a process opens and closes clients", async () => {
  const rng = caseRng();
  const app = `skein_fj_${randomBytes(3).toString("hex")}`;
  const { url: database } = pgDatabase(app);
  const sink = join(faultDir(), "sink.log");
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    const child = engineProcess(rng, {
      database,
      sink,
      workflows: [FAN],
      churn: { workflow_id: FAN.id, count: CLIENTS },
      engine: { maxConcurrency: 20 },
    });
    await child.waitFor("the first client's run", (m) => m.type === "started");
    let rounds = 0;
    let terminated = 0;
    const churned = () => child.messages.some((m) => m.type === "churned");
    const clients = () => acknowledged([child]).size;
    // A bound, not a speed target: 400 clients take about 20 s on an idle machine, and a loaded
    // one (CI on 2 cores beside other work) may take several times that.
    const until = Date.now() + 120_000;
    while (child.alive && !churned() && Date.now() < until) {
      await faultMoment(rng.int(5, 60));
      const { rows } = await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        [app],
      );
      terminated += rows.length;
      rounds += 1;
      // Never two cuts without a client started in between: on a loaded machine a new
      // connection's first transaction can outlast the pause, and cutting every connection as it
      // opens measures only the machine's speed. The cuts still land at random moments of the
      // clients' and the engine's work.
      const next = `churn-${clients()}`;
      await child.waitFor(`${next} or the end of the churn`, (m) => m.key === next || m.type === "churned");
    }
    const survived = child.alive;
    const acked = [...acknowledged([child]).values()];
    // T_max: the runs' attempts take at most 120 ms each; the engine reconnects at once.
    if (survived) {
      await pollUntil("every acknowledged run final", 20_000, async () => {
        const h = await readHistory(database);
        const final = h.runs.filter((r) => acked.includes(r.run_id) && r.status !== "RUNNING").length;
        return final >= acked.length ? true : undefined;
      });
    }
    const { history, sink: effects } = await readOutcome(database, sink);
    const figures = computeOracles(history, effects, acked);
    reportLine(
      "j pg-churn",
      figures,
      rng.seed,
      `${terminated} connections terminated in ${rounds} rounds, ${acked.length} clients opened and closed, ${survived ? "the process survived" : `the PROCESS DIED (${child.errors.match(/^.*Unhandled.*$/m)?.[0]?.trim() ?? `exit ${child.proc.exitCode}`})`}`,
    );
    expect(child.errors.split("\n").filter((l) => /Unhandled|uncaught/i.test(l))).toEqual([]);
    expect(survived, "the process died of a terminated connection").toBe(true);
    expect(churned()).toBe(true);
    expect(terminated).toBeGreaterThan(0);
    expect(figures.problems).toEqual([]);
    expect({ lost: figures.lost, doubled: figures.doubled, stale: figures.stale }).toEqual({
      lost: 0,
      doubled: 0,
      stale: 0,
    });
  } finally {
    await admin.end();
  }
}, 180_000);
