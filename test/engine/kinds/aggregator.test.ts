/**
 * The aggregator's output obeys the limit of every agent's output (maxPayloadBytes): its sources
 * each kept the limit, but together they may not (50 branches of 1 MB made a 50 MB output).
 */
import { describe, expect, it } from "vitest";
import type { Task } from "../../../src/index.js";
import { testEngine } from "../../helpers.js";

const LIMIT = 10_000;
const agents = {
  /** About `payload.bytes` bytes of output. */
  big: (t: Task) => ({ text: "x".repeat((t.payload as { bytes: number }).bytes) }),
  ok: () => ({ ok: true }),
};

/** Five branches of `bytes` each, joined by an aggregator (inline, or dispatched when it branches). */
function fanIn(id: string, bytes: number, branches: boolean) {
  const sources = ["b1", "b2", "b3", "b4", "b5"];
  return {
    id,
    nodes: [
      ...sources.map((node_id) => ({ node_id, agent_type: "big", payload: { bytes } })),
      {
        node_id: "all",
        agent_type: "aggregator",
        depends_on: sources,
        ...(branches ? { next_on_success: [{ when: "$count($keys(output)) = 5", to: "after" }] } : {}),
      },
      ...(branches ? [{ node_id: "after", agent_type: "ok" }] : []),
    ],
  };
}

describe("the aggregator's output limit", () => {
  for (const branches of [false, true]) {
    const kind = branches ? "dispatched (it branches on its output)" : "inline";
    it(`fails the ${kind} aggregator's visit past maxPayloadBytes, saying to list fewer sources`, async () => {
      const { engine } = await testEngine({ agents, maxPayloadBytes: LIMIT });
      await engine.registerWorkflow(fanIn("too-big", 3000, branches));
      const run = await engine.waitForRun((await engine.startRun("too-big")).run_id);
      expect(run.status).toBe("FAILED");
      const all = run.nodes.find((n) => n.node_id === "all");
      expect(all?.state).toBe("FAILED");
      expect(all?.output ?? null).toBeNull();
      expect(all?.error?.message).toMatch(/aggregator's output is \d+ bytes, over the limit of 10000/);
      expect(all?.error?.message).toContain("list fewer sources");

      await engine.registerWorkflow(fanIn("fits", 1000, branches));
      const fits = await engine.waitForRun((await engine.startRun("fits")).run_id);
      // On failure, say why the run failed (a `when` past the sandbox's limit on a loaded machine?).
      expect(fits.status, JSON.stringify(fits.nodes.map((n) => [n.node_id, n.state, n.error]))).toBe("SUCCEEDED");
      expect(Object.keys(fits.nodes.find((n) => n.node_id === "all")?.output as object)).toHaveLength(5);
    });
  }
});
