/**
 * A sleeping node says when it wakes, on the run page as it opens: on its graph node and in the
 * nodes table, without selecting it; its details call that time "Wakes at", and "Deadline" stays
 * for real deadlines (a review's timeout, beside it).
 */
import { describe, expect, it } from "vitest";
import { expectAccessible, nodeInState, serve, signIn } from "./helpers.js";

const NAP = {
  id: "nap",
  nodes: [
    { node_id: "nap", agent_type: "sleep", payload: { seconds: 3600 } },
    { node_id: "ask", agent_type: "human_review", timeout: 7200, payload: { title: "Go on?", assignees: ["ops"] } },
    { node_id: "after", agent_type: "echo", depends_on: ["nap", "ask"] },
  ],
};

interface Visit {
  node_id: string;
  deadline_at: number | null;
}

describe("a sleeping node on the run page", { timeout: 90_000 }, () => {
  it("shows when it wakes without being selected, labelled as a wake-up and not as a deadline", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/nap", NAP);
    const { run_id } = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "nap" });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run_id}`);
    const node = await nodeInState(page, "nap", "WAITING");
    await nodeInState(page, "ask", "IN_REVIEW");
    const { nodes } = await s.api<{ nodes: Visit[] }>("GET", `/v1/runs/${run_id}`);
    const wakes = nodes.find((n) => n.node_id === "nap")?.deadline_at;
    if (typeof wakes !== "number") throw new Error("the sleeping node has no due time");
    const iso = new Date(wakes).toISOString();

    // On the graph node: the time it wakes (short), and in full in its name and title.
    expect(await node.locator("text.node-state").textContent()).toMatch(
      /^wakes at (\d{4}-\d{2}-\d{2} \d{2}:\d{2}|\d{2}:\d{2}:\d{2})$/,
    );
    expect(await node.getAttribute("aria-label")).toMatch(new RegExp(`^nap: WAITING, wakes at .*\\(${iso}\\)$`));
    // A review waits too, for a person: no wake-up time on it.
    expect(await page.locator('g.node[data-node-id="ask"] text.node-state').textContent()).toBe("IN_REVIEW");

    // In the nodes table, beside its state.
    const nodesTable = page.getByRole("table", { name: "nodes" });
    const napRow = nodesTable.locator("tr", { has: page.getByRole("link", { name: "nap", exact: true }) });
    await napRow.locator(`.wakes-at time[datetime="${iso}"]`).waitFor();
    expect(await napRow.locator(".wakes-at").textContent()).toMatch(/^ wakes at /);
    expect(await nodesTable.locator(".wakes-at").count()).toBe(1);
    // All of that with no node selected.
    expect(await page.locator("article.node-details").count()).toBe(0);

    // Selected, its details call it "Wakes at"; the review's keep "Deadline".
    await node.click();
    const details = page.getByRole("article", { name: "node nap" });
    await details.waitFor();
    const facts = details.locator("dl.facts");
    expect(await facts.locator("dt", { hasText: /^Wakes at$/ }).count()).toBe(1);
    expect(await facts.locator("dt", { hasText: /^Deadline$/ }).count()).toBe(0);
    expect(await facts.locator(`dd time[datetime="${iso}"]`).count()).toBe(1);
    await expectAccessible(page, "the run page with a sleeping node");

    await page.locator('g.node[data-node-id="ask"]').click();
    const review = page.getByRole("article", { name: "node ask" });
    await review.waitFor();
    expect(await review.locator("dl.facts dt", { hasText: /^Deadline$/ }).count()).toBe(1);
    expect(await review.locator("dl.facts dt", { hasText: /^Wakes at$/ }).count()).toBe(0);
  });
});
