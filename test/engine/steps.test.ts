/**
 * Durable steps inside a visit (DESIGN §14.1): `task.step(name, fn)` records `fn`'s result before
 * returning it, and a later attempt of the same visit gets it back without calling `fn`.
 */
import { describe, expect, it } from "vitest";
import { ConflictError, type RunEvent, type Task } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

const isEvent = (type: string) => (e: RunEvent) => e.type === type;

describe("task.step", () => {
  it("a retry gets the recorded steps without calling them again, and runs the rest", async () => {
    const calls: string[] = [];
    const keys: string[] = [];
    const { engine } = await testEngine({
      agents: {
        research: async (t: Task) => {
          const plan = await t.step("plan", ({ idempotency_key }) => {
            calls.push(`plan@${t.attempt}`);
            keys.push(idempotency_key);
            return { topics: ["a", "b"], at: t.attempt };
          });
          const found: unknown[] = [];
          for (const topic of plan.topics as string[]) {
            found.push(
              await t.step(`search:${topic}`, () => {
                calls.push(`search:${topic}@${t.attempt}`);
                if (topic === "b" && t.attempt === 1) throw new Error("rate limited");
                return { topic, hits: 3 };
              }),
            );
          }
          return { plan, found };
        },
      },
    });
    await engine.registerWorkflow({
      id: "steps",
      nodes: [{ node_id: "r", agent_type: "research", retry_count: 2, retry_interval: 0 }],
    });
    const run = await engine.startRun("steps");
    const done = await engine.waitForRun(run.run_id);

    expect(done.status).toBe("SUCCEEDED");
    // Attempt 2 calls only the step that threw (it recorded nothing); the first call's value comes back.
    expect(calls).toEqual(["plan@1", "search:a@1", "search:b@1", "search:b@2"]);
    expect(done.nodes[0]?.output).toEqual({
      plan: { topics: ["a", "b"], at: 1 },
      found: [
        { topic: "a", hits: 3 },
        { topic: "b", hits: 3 },
      ],
    });
    const executionId = done.nodes[0]?.execution_id;
    expect(keys).toEqual([`${executionId}:plan`]);
    const steps = await engine.listSteps(run.run_id, "r");
    expect(steps.map((s) => [s.name, s.attempt, s.visit, s.execution_id])).toEqual([
      ["plan", 1, 1, executionId],
      ["search:a", 1, 1, executionId],
      ["search:b", 2, 1, executionId],
    ]);
    expect(steps[0]?.size).toBe(JSON.stringify({ topics: ["a", "b"], at: 1 }).length);
  });

  it("refuses a name used twice in one attempt, and a result that is not JSON, without retrying", async () => {
    const { engine } = await testEngine({
      agents: {
        twice: async (t: Task) => {
          await t.step("same", () => 1);
          return t.step("same", () => 2);
        },
        odd: (t: Task) => t.step("when", () => ({ at: () => 1 })),
      },
    });
    for (const id of ["twice", "odd"]) {
      await engine.registerWorkflow({
        id,
        nodes: [{ node_id: id, agent_type: id, retry_count: 3, retry_interval: 0 }],
      });
    }
    const twice = await engine.waitForRun((await engine.startRun("twice")).run_id);
    expect(twice.nodes[0]).toMatchObject({ state: "FAILED", attempt: 1 });
    expect(twice.nodes[0]?.error?.message).toContain('task.step("same") was called twice in attempt 1');
    expect((await engine.listSteps(twice.run_id, "twice")).map((s) => s.name)).toEqual(["same"]);
    const odd = await engine.waitForRun((await engine.startRun("odd")).run_id);
    expect(odd.nodes[0]).toMatchObject({ state: "FAILED", attempt: 1 });
    expect(odd.nodes[0]?.error?.message).toContain('the result of step "when"');
    expect(odd.nodes[0]?.error?.message).toContain("stored as JSON");
    expect(await engine.listSteps(odd.run_id, "odd")).toEqual([]);
  });

  it("a timed-out attempt's late step is refused: not called, not recorded, and its signal aborted", async () => {
    let release: () => void = () => {};
    let asked: (step: { promise: Promise<unknown> }) => void = () => {};
    const late = new Promise<{ promise: Promise<unknown> }>((resolve) => {
      asked = resolve;
    });
    let signal: AbortSignal | null = null;
    let called = false;
    const { engine, clock } = await testEngine({
      agents: {
        slow: async (t: Task) => {
          signal = t.signal;
          if (t.attempt === 1) {
            await new Promise<void>((resolve) => {
              release = resolve; // ignores the signal
            });
            const step = t.step("late", () => {
              called = true;
              return "too late";
            });
            asked({ promise: step });
            return step;
          }
          return "second";
        },
      },
    });
    await engine.registerWorkflow({
      id: "late-step",
      nodes: [{ node_id: "a", agent_type: "slow", timeout: 5, retry_count: 1, retry_interval: 1 }],
    });
    const started = nextEvent(engine, isEvent("node.started"));
    const run = await engine.startRun("late-step");
    await started;
    const retrying = nextEvent(engine, isEvent("node.retrying"));
    await clock.advance(5_000);
    await retrying;
    // Attempt 2 is due in a second: attempt 1 wakes up first and asks for a step.
    const first = signal as AbortSignal | null;
    release();
    const step = await late;
    await expect(step.promise).rejects.toBeInstanceOf(ConflictError);
    expect(called).toBe(false);
    expect(first?.aborted).toBe(true);
    const done = engine.waitForRun(run.run_id);
    await clock.advance(1_000);
    expect((await done).status).toBe("SUCCEEDED");
    expect(await engine.listSteps(run.run_id, "a")).toEqual([]);
  });

  it("a redrive's new visit starts with the failed visit's steps; with fresh_steps, with none", async () => {
    const calls: string[] = [];
    let fail = true;
    const { engine } = await testEngine({
      agents: {
        work: async (t: Task) => {
          const first = await t.step("first", () => {
            calls.push(`first@${t.visit}`);
            return { visit: t.visit };
          });
          if (fail) throw new Error("the second half failed");
          return first;
        },
      },
    });
    await engine.registerWorkflow({
      id: "redrive-steps",
      nodes: [{ node_id: "w", agent_type: "work", retry_count: 0 }],
    });
    const run = await engine.startRun("redrive-steps");
    expect((await engine.waitForRun(run.run_id)).status).toBe("FAILED");

    fail = false;
    await engine.retryRun(run.run_id);
    const again = await engine.waitForRun(run.run_id);
    expect(again.status).toBe("SUCCEEDED");
    expect(again.nodes[0]).toMatchObject({ visit: 2, output: { visit: 1 } }); // the step of visit 1, not run again
    expect(calls).toEqual(["first@1"]);

    // Failed again, then redriven with fresh steps: the step runs again in the new visit.
    const second = await engine.startRun("redrive-steps");
    fail = true;
    await engine.waitForRun(second.run_id);
    fail = false;
    await engine.retryRun(second.run_id, { fresh_steps: true });
    const fresh = await engine.waitForRun(second.run_id);
    expect(fresh.nodes[0]).toMatchObject({ visit: 2, output: { visit: 2 } });
    expect(calls).toEqual(["first@1", "first@1", "first@2"]);
    const steps = await engine.listSteps(second.run_id, "w");
    expect(steps.map((s) => [s.visit, s.attempt, s.output])).toEqual([
      [1, 1, { visit: 1 }],
      [2, 1, { visit: 2 }],
    ]);
  });

  it("a loop's next round starts with no steps", async () => {
    const calls: number[] = [];
    const { engine } = await testEngine({
      agents: {
        round: async (t: Task) => {
          const n = await t.step("count", () => {
            calls.push(t.visit);
            return t.visit;
          });
          return { n };
        },
      },
    });
    await engine.registerWorkflow({
      id: "loop-steps",
      nodes: [
        {
          node_id: "r",
          agent_type: "round",
          max_visits: 3,
          next_on_success: [{ when: "output.n < 3", to: "again" }, { to: "done" }],
        },
        { node_id: "again", agent_type: "round", next_on_success: "r" },
        { node_id: "done", agent_type: "round" },
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("loop-steps")).run_id);
    expect(run.status).toBe("SUCCEEDED");
    // r's three visits each call their step once (again and done: their own first visits).
    expect(calls.filter((_, i) => i % 2 === 0)).toEqual([1, 2, 3]);
    const steps = await engine.listSteps(run.run_id, "r");
    expect(steps.map((s) => [s.visit, s.output])).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
  });
});
