import { describe, expect, it } from "vitest";
import type { Notification } from "../../src/index.js";
import { testEngine } from "../helpers.js";

const flow = {
  id: "approve",
  nodes: [
    { node_id: "draft", agent_type: "writer" },
    { node_id: "check", agent_type: "human_review", depends_on: ["draft"], timeout: 3600 },
  ],
};

async function requested(publicUrl: string | undefined): Promise<Notification> {
  let received!: (n: Notification) => void;
  const notification = new Promise<Notification>((resolve) => {
    received = resolve;
  });
  const { engine } = await testEngine({
    agents: { writer: () => ({ title: "t" }) },
    notify: { hook: (n) => received(n) },
    ...(publicUrl === undefined ? {} : { publicUrl }),
  });
  await engine.registerWorkflow(flow);
  await engine.startRun("approve");
  return notification;
}

describe("review.requested notifications", () => {
  it("carry the URL where the HTTP API takes the decision, under the engine's publicUrl", async () => {
    const n = await requested("https://skein.example.com/");
    expect(n.type).toBe("review.requested");
    expect(n.review_url).toBe(`https://skein.example.com/v1/runs/${n.run_id}/nodes/check/review`);
  });

  it("have no review_url when the engine has no publicUrl", async () => {
    const n = await requested(undefined);
    expect(n.type).toBe("review.requested");
    expect(n).not.toHaveProperty("review_url");
  });
});
