/**
 * The run timeline in the admin page: a row per visit, a bar per attempt (a retried one drawn as
 * a failure), a review hatched, a map with its progress, a child run linked from its bar, and a
 * running attempt's bar that grows while the page watches. The last node is a `writer`, whose task the
 * test claims and later completes through /v1/tasks, so it decides how long that attempt runs.
 */
import { describe, expect, it } from "vitest";
import { expectAccessible, nodeInState, runStatus, serve, signIn, TOKENS } from "./helpers.js";

const LEAF = { id: "leaf", nodes: [{ node_id: "only", agent_type: "echo" }] };

const TIMED = {
  id: "timed",
  nodes: [
    { node_id: "fetch", agent_type: "flaky", retry_interval: 0 },
    {
      node_id: "check",
      agent_type: "human_review",
      depends_on: ["fetch"],
      payload: { title: "Go on?", assignees: ["ops"] },
    },
    {
      node_id: "fan",
      agent_type: "map",
      depends_on: ["check"],
      payload: { items: ["a", "b", "c"], each: { agent_type: "echo" } },
    },
    { node_id: "sub", agent_type: "workflow", depends_on: ["check"], payload: { workflow_id: "leaf" } },
    { node_id: "write", agent_type: "writer", depends_on: ["fan", "sub"] },
  ],
};

describe("the run timeline", { timeout: 90_000 }, () => {
  it("draws attempts, retries, a review, a map and a child run, live, and selects a node from its bar", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/leaf", LEAF);
    await s.api("PUT", "/v1/workflows/timed", TIMED);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "timed" });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}`);
    const timeline = page.locator("svg.timeline");
    const row = (node: string) => timeline.locator(`g.timeline-row[data-node-id="${node}"]`);
    /** The axis' labels as drawn now: "0", then each tick in the same unit. */
    const expectOneUnit = async () => {
      const labels = await timeline.locator("g.timeline-axis text").allTextContents();
      expect(labels[0]).toBe("0");
      expect(labels.length).toBeGreaterThan(1);
      expect(new Set(labels.slice(1).map((l) => l.split(" ")[1])).size, labels.join(", ")).toBe(1);
    };

    // The review waits: a hatched review bar, running. fetch failed once, then succeeded: two bars.
    await nodeInState(page, "check", "IN_REVIEW");
    await row("check").locator("g.timeline-bar.bar-review.outcome-running").waitFor();
    expect(await row("check").locator("rect.hatch").count()).toBe(1);
    const fetchBars = row("fetch").locator("g.timeline-bar");
    expect(await fetchBars.count()).toBe(2);
    expect(await fetchBars.nth(0).getAttribute("class")).toBe("timeline-bar bar-attempt outcome-retried");
    expect(await fetchBars.nth(1).getAttribute("class")).toBe("timeline-bar bar-attempt outcome-succeeded");
    expect(await fetchBars.nth(0).getAttribute("aria-label")).toMatch(/^fetch, attempt 1: retried, /);
    expect(await fetchBars.nth(1).locator("title").textContent()).toMatch(/^fetch, attempt 2: succeeded, /);
    // Rows not started yet are listed after, without bars.
    expect(await timeline.locator("g.timeline-row").evaluateAll((rows) => rows.map((r) => r.dataset.nodeId))).toEqual([
      "fetch",
      "check",
      "fan",
      "sub",
      "write",
    ]);
    expect(await row("write").locator("g.timeline-bar").count()).toBe(0);
    // Early in a run the axis spans seconds in steps under one: still one unit ("0.5 s", "1 s", not "500 ms", "1 s").
    await expectOneUnit();

    await s.api("POST", `/v1/runs/${run.run_id}/nodes/check/review`, { decision: "approve", by: "ops" });

    // The map's items and the child run ran; the writer's attempt runs until the test completes it.
    await row("check").locator("g.timeline-bar.bar-review.outcome-succeeded").waitFor();
    await row("fan").locator("g.timeline-bar.bar-map.outcome-succeeded").waitFor();
    const progress = row("fan").locator('g.timeline-map[role="progressbar"]');
    await progress.and(page.locator('[aria-valuenow="3"]')).waitFor();
    expect(await progress.getAttribute("aria-valuemax")).toBe("3");
    expect(await progress.getAttribute("data-succeeded")).toBe("3");
    await row("sub").locator("g.timeline-bar.bar-child.outcome-succeeded").waitFor();
    // The test, as the writer's worker, claims its task: its attempt starts, and runs until completed.
    const worker = { agent_types: ["writer"], worker_id: "timeline-test", wait_seconds: 15 };
    const { tasks } = await s.api<{ tasks: { execution_id: string; attempt: number }[] }>(
      "POST",
      "/v1/tasks/claim",
      worker,
      TOKENS.agent,
    );
    const task = tasks[0];
    if (!task) throw new Error("the writer's task did not become ready");
    const running = row("write").locator("g.timeline-bar.bar-attempt.outcome-running");
    await running.waitFor();
    expect(await running.count()).toBe(1);

    // It grows as time passes, without an event: the page redraws it.
    const width = await running.locator("rect").getAttribute("width");
    await page.waitForFunction(
      (before) => {
        const rect = document.querySelector('g.timeline-row[data-node-id="write"] g.timeline-bar.outcome-running rect');
        return rect !== null && Number(rect.getAttribute("width")) > Number(before);
      },
      width,
      { timeout: 20_000 },
    );

    await expectAccessible(page, "the run page with its timeline");

    // A click on a bar selects its node, as the graph does; so does Enter on a focused bar. The
    // last bar: once the run has lasted long, fetch's two short attempts are both drawn at the
    // minimum width, and the later one covers the earlier.
    await fetchBars.last().click();
    await page.waitForFunction(() => location.hash.endsWith("?node=fetch"));
    await page.getByRole("article", { name: "node fetch" }).waitFor();
    expect(await row("fetch").getAttribute("class")).toBe("timeline-row selected");
    await row("fan").locator("g.timeline-bar").focus();
    await page.keyboard.press("Enter");
    const fan = page.getByRole("article", { name: "node fan" });
    await fan.waitFor();
    // The map's details show its progress too.
    const bar = fan.locator("progress.map-progress");
    expect(await bar.evaluate((p: HTMLProgressElement) => [p.value, p.max])).toEqual([3, 3]);

    await s.api(
      "POST",
      `/v1/tasks/${task.execution_id}/complete`,
      { attempt: task.attempt, worker_id: worker.worker_id, output: { text: "done" } },
      TOKENS.agent,
    );
    await runStatus(page, "SUCCEEDED");
    await row("write").locator("g.timeline-bar.outcome-succeeded").waitFor();
    expect(await timeline.locator("g.timeline-bar.outcome-running").count()).toBe(0);
    await expectOneUnit();

    // The child run's bar links to it; its page links back to the parent.
    const child = await s.api<{ children: { run_id: string }[] }>("GET", `/v1/runs/${run.run_id}`);
    const childId = child.children[0]?.run_id;
    await row("sub")
      .getByRole("link", { name: `child run ${childId} of sub` })
      .click();
    await page.waitForFunction((id) => location.hash === `#/runs/${id}`, childId);
    await nodeInState(page, "only", "SUCCEEDED");
    await page.locator('g.timeline-row[data-node-id="only"] g.timeline-bar.outcome-succeeded').waitFor();
    await page.getByRole("link", { name: run.run_id }).waitFor();
  });
});
