/**
 * A visit of an agent type nothing serves (no engine's handler, no worker lately) is said to
 * wait for an agent: a warning in the log within a heartbeat, once per type; getRun's `waiting`;
 * the registration warning, with "did you mean". On PostgreSQL the judgement is the database's:
 * another engine's handlers, and a worker that polled another engine, count.
 */
import pino from "pino";
import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/index.js";
import { onPostgres, testEngine } from "../helpers.js";

const HEARTBEAT = 5000;
// No sweep timer on the way: the heartbeats are the timers these tests move through.
const quiet = { heartbeatIntervalMs: HEARTBEAT, sweepIntervalMs: 3_600_000 };

const typo = { id: "typo", nodes: [{ node_id: "write", agent_type: "sumarize" }] };
const translate = { id: "translate", nodes: [{ node_id: "tr", agent_type: "translate" }] };

interface Line {
  msg: string;
  agent_type?: string;
}

/** A logger whose lines the test reads. */
function captured(): { logger: pino.Logger; lines: Line[] } {
  const lines: Line[] = [];
  return { logger: pino({ level: "warn" }, { write: (l: string) => lines.push(JSON.parse(l)) }), lines };
}

const noAgentLines = (lines: Line[]) => lines.filter((l) => l.msg.includes("no engine or worker serves"));

async function waitingOf(engine: Engine, runId: string) {
  return (await engine.getRun(runId)).nodes[0]?.waiting;
}

describe("agent types nothing serves", () => {
  it("are said at registration, in getRun and once in the log within a heartbeat, with the nearest served type", async () => {
    const { logger, lines } = captured();
    const { engine, clock } = await testEngine({ ...quiet, logger, agents: { summarize: () => "ok" } });

    const registered = await engine.registerWorkflow(typo);
    expect(registered.warnings).toEqual([
      { path: "nodes[0].agent_type", message: expect.stringContaining('"sumarize" (did you mean "summarize"?)') },
    ]);
    const run = await engine.startRun("typo");
    expect(await waitingOf(engine, run.run_id)).toEqual({
      reason: "no_agent",
      message: expect.stringMatching(
        /^no engine or worker serves agent_type "sumarize" \(did you mean "summarize"\?\): its visits wait until their run's timeout; give an engine an agent for it, or start a worker/,
      ),
    });

    expect(noAgentLines(lines)).toEqual([]);
    await clock.advance(HEARTBEAT);
    await engine.lastBeat;
    expect(noAgentLines(lines)).toEqual([
      expect.objectContaining({
        agent_type: "sumarize",
        msg: expect.stringContaining(
          'skein: 1 ready visit: no engine or worker serves agent_type "sumarize" (did you mean "summarize"?)',
        ),
      }),
    ]);
    // Once per type, not per check.
    await engine.startRun("typo");
    await clock.advance(HEARTBEAT);
    await engine.lastBeat;
    expect(noAgentLines(lines)).toHaveLength(1);
  });

  it("count a worker that claimed the type lately, until it has been silent for a minute", async () => {
    const { logger, lines } = captured();
    const { engine, clock } = await testEngine({ ...quiet, logger });
    await engine.registerWorkflow(translate);
    const before = await engine.startRun("translate");
    expect((await waitingOf(engine, before.run_id))?.reason).toBe("no_agent");

    // A worker asks for the type (it finds the visit and takes it) and heartbeats it.
    const [task] = await engine.claimTasks({ agent_types: ["translate"], worker_id: "w1", lease_seconds: 3600 });
    expect(task?.run_id).toBe(before.run_id);
    const after = await engine.startRun("translate");
    expect(await waitingOf(engine, after.run_id)).toBeUndefined();
    expect((await engine.checkWorkflow(translate)).warnings).toEqual([]);
    const beats = async (n: number) => {
      for (let i = 0; i < n; i++) {
        await clock.advance(HEARTBEAT);
        await engine.lastBeat;
      }
    };
    await beats(6);
    await engine.heartbeatTask(task?.execution_id ?? "", { attempt: 1, worker_id: "w1" }); // 30 s after the claim
    await beats(11);
    // 85 s after the claim, 55 s after the heartbeat: still served, nothing said.
    expect(noAgentLines(lines)).toEqual([]);
    expect(await waitingOf(engine, after.run_id)).toBeUndefined();

    await beats(2);
    expect((await waitingOf(engine, after.run_id))?.reason).toBe("no_agent");
    expect(noAgentLines(lines).map((l) => l.agent_type)).toEqual(["translate"]);
    expect((await engine.checkWorkflow(translate)).warnings).toEqual([
      { path: "nodes[0].agent_type", message: expect.stringContaining('agent_type "translate"') },
    ]);
  });

  it.skipIf(!onPostgres)("count another engine's handlers and a worker that polls another engine", async () => {
    const a = await testEngine({ ...quiet, agents: { summarize: () => new Promise(() => undefined) } });
    const { logger, lines } = captured();
    const b = await testEngine({ ...quiet, clock: a.clock, database: a.database, logger });
    const clock = a.clock;

    // Another engine's handler: known from its row as it registered.
    expect(
      (await b.engine.checkWorkflow({ ...typo, nodes: [{ node_id: "w", agent_type: "summarize" }] })).warnings,
    ).toEqual([]);
    // A worker polls engine a for a type nothing else serves: engine b hears of it through a's row.
    await b.engine.registerWorkflow(translate);
    expect(await a.engine.claimTasks({ agent_types: ["translate"], worker_id: "w1" })).toEqual([]);
    await clock.advance(HEARTBEAT);
    await Promise.all([a.engine.lastBeat, b.engine.lastBeat]);
    const run = await b.engine.startRun("translate");
    expect(await waitingOf(b.engine, run.run_id)).toBeUndefined();
    expect((await b.engine.checkWorkflow(translate)).warnings).toEqual([]);
    await clock.advance(HEARTBEAT);
    await Promise.all([a.engine.lastBeat, b.engine.lastBeat]);
    expect(noAgentLines(lines)).toEqual([]);
  });
});
