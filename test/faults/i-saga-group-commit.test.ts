/**
 * Case i (issue 14 item 1): a saga whose failure and a sibling's result share one group commit.
 * `reserve` (with a compensation) is followed by two parallel steps with compensations: `x`
 * fails for good and `y` succeeds at the same instant (both wait for each other, then return in
 * the same tick, so both results are applied by one flush). Every run must compensate fully
 * before it ends: FAILED, each planned compensation SUCCEEDED (none left PENDING), no
 * `needs_attention`, and the run's end recorded after the last compensation.
 */
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type AgentHandler, createEngine, NonRetryableError, type Task } from "../../src/index.js";
import { computeOracles, readOutcome, reportLine } from "./oracles.js";
import { caseRng, faultDir, onCleanup, pgDatabase, pollUntil } from "./setup.js";
import { compensated } from "./workflows.js";

const RUNS = 20;

const SAGA = {
  id: "fault-saga-parallel",
  defaults: { retry_count: 0, timeout: 60 },
  nodes: [
    { node_id: "reserve", agent_type: "step", compensation: { agent_type: "undo" } },
    { node_id: "x", agent_type: "fails", depends_on: ["reserve"], compensation: { agent_type: "undo" } },
    { node_id: "y", agent_type: "step", depends_on: ["reserve"], compensation: { agent_type: "undo" } },
  ],
};

describe.each(["sqlite", "postgres"])("i on %s", (store) => {
  it(`i: a saga's failure and a sibling's result in one group commit, ${RUNS} runs`, async () => {
    const rng = caseRng();
    const dir = faultDir();
    const database = store === "sqlite" ? `sqlite:${join(dir, "skein.db")}` : pgDatabase().url;
    const sink = join(dir, "sink.log");
    const record = (t: Task, phase: "start" | "done") =>
      appendFileSync(
        sink,
        `${JSON.stringify({ phase, run_id: t.run_id, node_id: t.node_id, execution_id: t.execution_id, attempt: t.attempt, pid: process.pid, by: "test" })}\n`,
      );
    // x and y of a run meet here; the second to arrive releases both in the same tick.
    const meeting = new Map<string, () => void>();
    const meet = (t: Task) =>
      new Promise<void>((resolve) => {
        const other = meeting.get(t.run_id);
        if (other) {
          meeting.delete(t.run_id);
          other();
          resolve();
        } else meeting.set(t.run_id, resolve);
      });
    const agents: Record<string, AgentHandler> = {
      step: async (t) => {
        record(t, "start");
        if (t.node_id === "y") await meet(t);
        record(t, "done");
        return { node: t.node_id };
      },
      fails: async (t) => {
        record(t, "start");
        await meet(t);
        throw new NonRetryableError("out of stock");
      },
      undo: async (t) => {
        record(t, "start");
        await new Promise((resolve) => setTimeout(resolve, rng.int(1, 10)));
        record(t, "done");
        return { undone: t.compensates?.execution_id ?? null };
      },
    };
    const engine = await createEngine({ database, agents });
    onCleanup(() => engine.close({ timeoutMs: 100 }));
    await engine.registerWorkflow(SAGA);
    const runs = await Promise.all(Array.from({ length: RUNS }, (_, i) => engine.startRun(SAGA.id, { input: { i } })));
    const ids = runs.map((r) => r.run_id);
    // T_max: every step and compensation takes at most 10 ms; the runs end within seconds.
    await pollUntil("every run final", 10_000, async () => {
      const all = await Promise.all(ids.map((id) => engine.getRun(id)));
      return all.every((r) => r.status === "FAILED" || r.status === "SUCCEEDED" || r.status === "CANCELLED")
        ? true
        : undefined;
    });
    // A compensation still running (or never started) after the end would show in the rows.
    const { history, sink: effects } = await readOutcome(database, sink);
    const figures = computeOracles(history, effects, ids, { expectation: compensated });
    const pending = history.compensations.filter((c) => c.state === "PENDING").length;
    const ySucceeded = history.visits.filter((v) => v.node_id === "y" && v.state === "SUCCEEDED").length;
    reportLine(
      `i saga-group-commit (${store})`,
      figures,
      rng.seed,
      `${pending} compensations left PENDING; y SUCCEEDED in ${ySucceeded} runs, CANCELLED in ${RUNS - ySucceeded}`,
    );
    expect(figures.problems).toEqual([]);
    expect({ lost: figures.lost, doubled: figures.doubled, stale: figures.stale }).toEqual({
      lost: 0,
      doubled: 0,
      stale: 0,
    });
  }, 20_000);
});
