import { describe, expect, it } from "vitest";
import type { Task } from "../../src/index.js";
import { testEngine } from "../helpers.js";

// review → (ok) publish, else rework → back to review (a loop-back edge: review is listed earlier).
const loop = (maxVisits?: number) => ({
  id: "loop",
  nodes: [
    { node_id: "draft", agent_type: "writer" },
    {
      node_id: "review",
      agent_type: "reviewer",
      depends_on: ["draft"],
      ...(maxVisits ? { max_visits: maxVisits } : {}),
      next_on_success: [{ when: "output.ok", to: "publish" }, { to: "rework" }],
    },
    { node_id: "rework", agent_type: "writer", next_on_success: "review" },
    { node_id: "publish", agent_type: "writer" },
  ],
});

describe("loops", () => {
  it("runs the loop twice, then exits; each visit has its own execution_id", async () => {
    const reviews: Task[] = [];
    const { engine } = await testEngine({
      agents: {
        writer: (t: Task) => `${t.node_id}#${t.visit}`,
        reviewer: (t: Task) => {
          reviews.push(t);
          return { ok: t.visit >= 3 };
        },
      },
    });
    await engine.registerWorkflow(loop());
    const run = await engine.waitForRun((await engine.startRun("loop")).run_id);
    expect(run.status).toBe("SUCCEEDED");
    expect(reviews.map((t) => t.visit)).toEqual([1, 2, 3]);
    expect(new Set(reviews.map((t) => t.execution_id)).size).toBe(3);
    expect(reviews.map((t) => t.trigger?.node_id ?? null)).toEqual([null, "rework", "rework"]);
    // The loop-back's source was superseded in the same transaction that claimed the new visit.
    expect(reviews[1]?.trigger).toEqual({
      node_id: "rework",
      visit: 1,
      status: "SUCCEEDED",
      output: "rework#1",
      error: null,
    });
    expect(reviews[2]?.trigger).toMatchObject({ visit: 2, output: "rework#2" });

    const visits = await engine.listVisits(run.run_id);
    const count = (id: string) => visits.filter((v) => v.node_id === id).length;
    expect({ draft: count("draft"), review: count("review"), rework: count("rework") }).toEqual({
      draft: 1,
      review: 3,
      rework: 3, // two that ran, and the third visit skipped when review chose publish
    });
    const current = Object.fromEntries(run.nodes.map((n) => [n.node_id, [n.state, n.visit]]));
    expect(current).toEqual({
      draft: ["SUCCEEDED", 1],
      review: ["SUCCEEDED", 3],
      rework: ["SKIPPED", 3],
      publish: ["SUCCEEDED", 3],
    });
    const resets = (await engine.listEvents(run.run_id)).filter((e) => e.type === "loop.reset");
    expect(resets).toHaveLength(2);
  });

  it("fails the node with max_visits_exceeded when the loop never exits", async () => {
    const { engine } = await testEngine({
      agents: { writer: () => "x", reviewer: () => ({ ok: false }) },
    });
    await engine.registerWorkflow(loop(3));
    const run = await engine.waitForRun((await engine.startRun("loop")).run_id);
    expect(run.status).toBe("FAILED");
    const review = run.nodes.find((n) => n.node_id === "review");
    expect(review).toMatchObject({ state: "FAILED", reason: "max_visits_exceeded", visit: 4, attempt: 0 });
    expect(run.error?.message).toContain("max_visits");
    const started = (await engine.listEvents(run.run_id)).filter(
      (e) => e.type === "node.started" && e.node_id === "review",
    );
    expect(started).toHaveLength(3);
  });

  it("templates read the latest terminal visit of a node", async () => {
    const seen: unknown[] = [];
    const { engine } = await testEngine({
      agents: {
        writer: (t: Task) => ({ text: `${t.node_id}#${t.visit}` }),
        reviewer: (t: Task) => {
          seen.push(t.payload);
          return { ok: t.visit >= 2 };
        },
      },
    });
    const def = loop();
    (def.nodes[1] as Record<string, unknown>).payload = {
      latest: "{{ nodes.rework.output.text }}",
      first: "{{ nodes.draft.output.text }}",
    };
    await engine.registerWorkflow(def);
    const run = await engine.waitForRun((await engine.startRun("loop")).run_id);
    expect(run.status).toBe("SUCCEEDED");
    expect(seen).toEqual([
      { latest: null, first: "draft#1" },
      { latest: "rework#1", first: "draft#1" },
    ]);
  });
});
