/**
 * Case e (FAULT-PLAN 7, 8; DESIGN §5, §13): `skein worker` A claims tasks with a 1 s lease and is
 * SIGSTOPped while its agents work (a zombie: they ignore their abort signal); its leases run
 * out, worker B claims the tasks and completes them; then A gets SIGCONT and reports. A's
 * heartbeat or report is answered 409 (A drops the task), every result is B's, and A's late
 * reports, when they reach the engine, are recorded as `result.fenced`.
 */
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { describe, expect, it } from "vitest";
import { createServer } from "../../src/http/server.js";
import { createEngine } from "../../src/index.js";
import { computeOracles, readOutcome, readSink, reportLine } from "./oracles.js";
import { caseRng, faultDir, faultMoment, onCleanup, pgDatabase, pollUntil, workerProcess } from "./setup.js";

const RUNS = 5;
const TOKENS = {
  a: "agent-token-a-0123456789abcdef",
  b: "agent-token-b-0123456789abcdef",
};

describe.each(["sqlite", "postgres"])("e on %s", (store) => {
  it("e: a zombie worker past its lease reports after another worker took the task", async () => {
    const rng = caseRng();
    const dir = faultDir();
    const database = store === "sqlite" ? `sqlite:${join(dir, "skein.db")}` : pgDatabase().url;
    const sink = join(dir, "sink.log");
    const engine = await createEngine({ database, sweepIntervalMs: 100 });
    onCleanup(() => engine.close({ timeoutMs: 100 }));
    const app: FastifyInstance = await createServer({
      engine,
      tokens: [
        { token: TOKENS.a, role: "agent", name: "worker-a", agent_types: ["work", "fail", "undo"] },
        { token: TOKENS.b, role: "agent", name: "worker-b", agent_types: ["work", "fail", "undo"] },
      ],
    });
    onCleanup(() => app.close());
    const server = await app.listen({ host: "127.0.0.1", port: 0 });

    await engine.registerWorkflow({
      id: "fault-zombie",
      defaults: { retry_count: 3, retry_interval: 0.1, timeout: 60 },
      nodes: [{ node_id: "z", agent_type: "work", payload: { ms: rng.int(600, 1200), zombie: true } }],
    });
    const concurrency = ["--concurrency", String(RUNS)];
    const a = workerProcess(rng, server, TOKENS.a, "worker-a", sink, ["--lease-seconds", "1", ...concurrency]);
    const runs: string[] = [];
    for (let i = 0; i < RUNS; i++) runs.push((await engine.startRun("fault-zombie", { input: { i } })).run_id);
    await pollUntil("A working on every task", 10_000, () =>
      readSink(sink).filter((s) => s.by === "worker-a").length === RUNS ? true : undefined,
    );
    a.proc.kill("SIGSTOP");
    const b = workerProcess(rng, server, TOKENS.b, "worker-b", sink, ["--lease-seconds", "10", ...concurrency]);
    await pollUntil("B's results", 15_000, async () => {
      const all = await Promise.all(runs.map((id) => engine.getRun(id)));
      return all.every((r) => r.status === "SUCCEEDED") ? true : undefined;
    });
    await faultMoment(rng.int(0, 300));
    a.proc.kill("SIGCONT");
    // A drops every task: its heartbeat or its report was refused (409, or 403 for a holder bound elsewhere).
    const refusals = () => (a.errors.match(/dropped |refused \(40[39]\)/g) ?? []).length;
    await pollUntil("A's refusals", 10_000, () => (refusals() >= RUNS ? true : undefined));
    await Promise.all([a.kill(), b.kill()]);

    const { history, sink: effects } = await readOutcome(database, sink);
    const figures = computeOracles(history, effects, runs);
    const visits = history.visits.filter((v) => v.node_id === "z");
    const byB = visits.filter((v) => (v.output as { by?: string } | null)?.by === "worker-b").length;
    const fenced = history.events.filter((e) => e.type === "result.fenced").length;
    const expired = history.events.filter(
      (e) => e.type === "node.retrying" && (e.data.error as { reason?: string }).reason === "lease_expired",
    ).length;
    reportLine(
      `e zombie-worker (${store})`,
      figures,
      rng.seed,
      `${expired} leases expired, ${byB} results by B, ${fenced} late reports of A fenced, A's heartbeats or reports refused for all ${refusals()} tasks`,
    );
    expect(figures.problems).toEqual([]);
    expect({ lost: figures.lost, doubled: figures.doubled, stale: figures.stale }).toEqual({
      lost: 0,
      doubled: 0,
      stale: 0,
    });
    expect(byB).toBe(RUNS);
    expect(expired).toBe(RUNS);
    // Nothing A sent after its lease changed anything: each visit has one success, B's attempt.
    for (const v of visits) {
      const successes = history.events.filter((e) => e.type === "node.succeeded" && e.run_id === v.run_id);
      expect(successes.map((e) => e.data.attempt)).toEqual([v.attempt]);
    }
  }, 30_000);
});
