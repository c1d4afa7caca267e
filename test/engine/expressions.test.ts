/**
 * Expressions cannot take the process down (DESIGN §13): a poison template or `when` fails its
 * visit (`template_error`, `when_error`) with a clear message, and the engine goes on serving.
 * Each case would abort the process (V8 out of memory) or freeze it for seconds without the
 * sandbox (src/definition/sandbox.ts).
 */
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/errors.js";
import type { Task } from "../../src/index.js";
import { testEngine } from "../helpers.js";

const agents = { echo: (t: Task) => t.payload, ok: () => ({ ok: true }) };

async function engineWithFine() {
  const t = await testEngine({ agents });
  await t.engine.registerWorkflow({
    id: "fine",
    nodes: [{ node_id: "a", agent_type: "echo", payload: { n: "{{ $count(input.items) }}" } }],
  });
  const fineRun = async () => {
    const run = await t.engine.waitForRun((await t.engine.startRun("fine", { input: { items: [1, 2] } })).run_id);
    expect(run.status).toBe("SUCCEEDED");
    expect(run.nodes[0]?.output).toEqual({ n: 2 });
  };
  return { ...t, fineRun };
}

describe("poison expressions", () => {
  it("fails the visit when $pad would make a string of 2e8 characters (a fatal V8 error before)", async () => {
    const { engine, fineRun } = await engineWithFine();
    await engine.registerWorkflow({
      id: "pad",
      nodes: [{ node_id: "a", agent_type: "echo", payload: { n: '{{ $length($pad("", input.n)) }}' } }],
    });
    const run = await engine.waitForRun((await engine.startRun("pad", { input: { n: 2e8 } })).run_id);
    expect(run.status).toBe("FAILED");
    expect(run.nodes[0]).toMatchObject({ state: "FAILED", reason: "template_error", attempt: 0 });
    expect(run.nodes[0]?.error?.message).toContain("$pad width 200000000 is over the limit");
    await fineRun();
  });

  it("stops a backtracking regular expression at the time limit (the built-in is one JSONata step)", async () => {
    const { engine, fineRun } = await engineWithFine();
    await engine.registerWorkflow({
      id: "regex",
      nodes: [{ node_id: "a", agent_type: "echo", payload: { m: "{{ $match(input.s, /(a+)+$/) }}" } }],
    });
    const run = await engine.waitForRun(
      (await engine.startRun("regex", { input: { s: `${"a".repeat(64)}b` } })).run_id,
    );
    expect(run.nodes[0]).toMatchObject({ state: "FAILED", reason: "template_error" });
    expect(run.nodes[0]?.error?.message).toContain("ran longer than 1000 ms");
    await fineRun();
  });

  it("stops $join of a huge list and a $sort past the sandbox's memory", async () => {
    const { engine, fineRun } = await engineWithFine();
    const templates = {
      join: "{{ $length($join([1..input.n].$string())) }}",
      sort: "{{ $count($sort([1..input.n])) }}",
    };
    for (const [id, template] of Object.entries(templates)) {
      await engine.registerWorkflow({ id, nodes: [{ node_id: "a", agent_type: "echo", payload: { s: template } }] });
      const run = await engine.waitForRun((await engine.startRun(id, { input: { n: 10_000_000 } })).run_id);
      expect(run.nodes[0]).toMatchObject({ state: "FAILED", reason: "template_error" });
      expect(run.nodes[0]?.error?.message).toMatch(/ran longer than|over the limit|more than \d+ MB of memory/);
    }
    await fineRun();
  });

  it("fails the visit with when_error when a when condition is poison", async () => {
    const { engine, fineRun } = await engineWithFine();
    await engine.registerWorkflow({
      id: "when",
      nodes: [
        {
          node_id: "a",
          agent_type: "ok",
          next_on_success: [{ when: "$contains(input.s, /(x+x+)+y/)", to: "b" }, { to: "c" }],
        },
        { node_id: "b", agent_type: "ok" },
        { node_id: "c", agent_type: "ok" },
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("when", { input: { s: "x".repeat(40) } })).run_id);
    expect(run.nodes.find((n) => n.node_id === "a")).toMatchObject({ state: "FAILED", reason: "when_error" });
    expect(run.nodes.find((n) => n.node_id === "a")?.error?.message).toContain("ran longer than 1000 ms");
    await fineRun();
  });

  it("refuses $eval and reserved names when the workflow is registered, with the path", async () => {
    const { engine } = await testEngine({ agents });
    const refused = await engine
      .registerWorkflow({
        id: "evil",
        nodes: [
          { node_id: "a", agent_type: "echo", payload: { x: "{{ $eval(input.code) }}" } },
          { node_id: "b", agent_type: "echo", payload: { y: "{{ nodes.__proto__.output }}" } },
          { node_id: "c", agent_type: "ok", next_on_success: [{ when: "input.constructor", to: "d" }] },
          { node_id: "d", agent_type: "ok" },
        ],
      })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ValidationError);
    expect((refused as ValidationError).problems).toEqual([
      { path: "nodes[0].payload.x", message: expect.stringContaining("$eval, which is not available") },
      { path: "nodes[1].payload.y", message: expect.stringContaining('reads "__proto__", which is refused') },
      { path: "nodes[2].next_on_success[0].when", message: expect.stringContaining('reads "constructor"') },
    ]);
  });

  it("refuses a node named __proto__, whose output would be lost", async () => {
    const { engine } = await testEngine({ agents });
    const refused = await engine
      .registerWorkflow({ id: "proto", nodes: [{ node_id: "__proto__", agent_type: "ok" }] })
      .catch((e: unknown) => e);
    expect((refused as ValidationError).problems).toEqual([
      { path: "nodes[0].node_id", message: expect.stringContaining("reserved") },
    ]);
  });
});
