/**
 * Run tags (DESIGN §16): startRun's pairs kept on the run, inherited by its child runs, and
 * listRuns' filter by every pair given (an index on each store); bad tags are refused with each
 * one's path.
 */
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/index.js";
import { testEngine } from "../helpers.js";

const CHILD = { id: "child", nodes: [{ node_id: "c", agent_type: "echo" }] };
const PARENT = {
  id: "parent",
  nodes: [{ node_id: "sub", agent_type: "workflow", payload: { workflow_id: "child" } }],
};

async function engineWithWorkflows() {
  const { engine } = await testEngine({ agents: { echo: () => ({ ok: true }) } });
  await engine.registerWorkflow(CHILD);
  await engine.registerWorkflow(PARENT);
  return engine;
}

describe("run tags", () => {
  it("keeps a run's tags, gives them to its child runs, and finds runs by every pair given", async () => {
    const engine = await engineWithWorkflows();
    const acme = await engine.startRun("parent", { tags: { customer: "acme", channel: "email" } });
    const globex = await engine.startRun("parent", { tags: { customer: "globex", channel: "email" } });
    const untagged = await engine.startRun("child");
    for (const run of [acme, globex, untagged]) await engine.waitForRun(run.run_id);

    expect((await engine.getRun(acme.run_id)).tags).toEqual({ customer: "acme", channel: "email" });
    expect((await engine.getRun(untagged.run_id)).tags).toEqual({});
    const [child] = (await engine.getRun(acme.run_id)).children;
    expect((await engine.getRun(child?.run_id as string)).tags).toEqual({ customer: "acme", channel: "email" });

    const ids = async (tags: Record<string, string>, workflow_id?: string) =>
      (await engine.listRuns({ tags, ...(workflow_id ? { workflow_id } : {}) })).map((r) => r.run_id).sort();
    expect(await ids({ customer: "acme" }, "parent")).toEqual([acme.run_id]);
    expect(await ids({ channel: "email" }, "parent")).toEqual([acme.run_id, globex.run_id].sort());
    expect(await ids({ channel: "email", customer: "globex" }, "parent")).toEqual([globex.run_id]);
    expect(await ids({ customer: "acme" }, "child")).toEqual([child?.run_id]);
    expect(await ids({ customer: "initech" })).toEqual([]);
    // No tags given: no filter.
    expect((await engine.listRuns({ tags: {}, workflow_id: "parent" })).length).toBe(2);
  });

  it("refuses tags that are not valid, each with its path, and starts nothing", async () => {
    const engine = await engineWithWorkflows();
    const refused = await engine
      .startRun("child", { tags: { "bad name": "x", ok: 3 as unknown as string, long: "v".repeat(257) } })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ValidationError);
    expect((refused as ValidationError).problems.map((p) => p.path)).toEqual(["tags.bad name", "tags.ok", "tags.long"]);
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`t${i}`, "v"]));
    await expect(engine.startRun("child", { tags: many })).rejects.toThrow(/Run tags are not valid/);
    await expect(engine.listRuns({ tags: { "no spaces": "x" } })).rejects.toBeInstanceOf(ValidationError);
    expect(await engine.listRuns({})).toEqual([]);
  });
});
