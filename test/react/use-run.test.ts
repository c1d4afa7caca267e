/**
 * skein/react in Chromium: a page rendering useRun shows a run's state as it changes and an
 * external writer's streamed text as it arrives (across a dropped connection), and useReviews lists the review the run waits
 * on until it is decided. Against a real `skein serve`, through a same-origin proxy.
 */
import { describe, expect, it } from "vitest";
import { claimWriter, servePage, TOKENS } from "./helpers.js";

const PUBLISH = {
  id: "publish",
  nodes: [
    { node_id: "draft", agent_type: "writer" },
    {
      node_id: "check",
      agent_type: "human_review",
      depends_on: ["draft"],
      timeout: 3600,
      payload: { title: "Publish the draft?", assignees: ["alice"] },
      next_on_success: "publish",
    },
    { node_id: "publish", agent_type: "echo" },
  ],
};

describe("useRun and useReviews in a browser", { timeout: 90_000 }, () => {
  it("show a run's state, each node's streamed text, and the review it waits on", async () => {
    const p = await servePage();
    await p.api("PUT", "/v1/workflows/publish", PUBLISH);
    const run = await p.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "publish", input: {} });
    const writer = await claimWriter(p);
    const { page } = p;
    await p.openRun(run.run_id);
    await page
      .getByTestId("connection")
      .filter({ hasText: /^connected$/ })
      .waitFor();
    await page.getByTestId("state-draft").filter({ hasText: "RUNNING" }).waitFor();

    // Deltas concatenate, each shown as it arrives (the next is sent once the page shows the last).
    const text = page.getByTestId("text-draft");
    expect(await writer.progress({ delta: "Durable agents " })).toEqual({ delivered: true });
    await text.filter({ hasText: /^Durable agents $/ }).waitFor();
    // The network drops: the stream reopens by itself, and the text so far stays.
    p.dropConnections();
    await p.streamOpened(2);
    expect(await writer.progress({ delta: "keep <b>their</b> work." })).toEqual({ delivered: true });
    await text.filter({ hasText: /^Durable agents keep <b>their<\/b> work\.$/ }).waitFor();
    expect(await text.locator("b").count()).toBe(0); // text, never markup

    await writer.complete({ text: "Durable agents keep their work." });
    await page.getByTestId("state-check").filter({ hasText: "IN_REVIEW" }).waitFor();
    await page.getByRole("button", { name: "Refresh reviews" }).click();
    const pending = page.getByRole("list", { name: "pending reviews" });
    await pending.getByText(`${run.run_id}:check`).waitFor();

    await p.api("POST", `/v1/runs/${run.run_id}/nodes/check/review`, { decision: "approve" }, TOKENS.alice);
    await page.getByTestId("status").filter({ hasText: "SUCCEEDED" }).waitFor();
    expect(await page.getByTestId("state-publish").textContent()).toBe("SUCCEEDED");
    // The finished node keeps the text it streamed.
    expect(await text.textContent()).toBe("Durable agents keep <b>their</b> work.");
    await page.getByRole("button", { name: "Refresh reviews" }).click();
    await pending.getByRole("listitem").waitFor({ state: "detached" });
  });
});
