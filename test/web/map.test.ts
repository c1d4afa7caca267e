/**
 * A map node in the admin page: a progress bar on its graph node that moves as items end, and a
 * paged item table in its details (50 a page) saying each item's state and attempt. The items are `writer`
 * nodes the test completes through /v1/tasks, one at a time, so it decides when each one ends.
 */
import { describe, expect, it } from "vitest";
import { expectAccessible, nodeInState, runStatus, serve, signIn } from "./helpers.js";

interface RunBody {
  run_id: string;
}

/** A map over `items`, each item one `each` node, then an echo. */
const fan = (id: string, items: unknown[], each: object, maxConcurrency = 10) => ({
  id,
  nodes: [
    { node_id: "answer", agent_type: "map", payload: { items, max_concurrency: maxConcurrency, each } },
    { node_id: "after", agent_type: "echo", depends_on: ["answer"] },
  ],
});

describe("a map node in the admin page", { timeout: 90_000 }, () => {
  it("shows a progress bar that moves as items end, and an item table with each item's attempt", async () => {
    const s = await serve();
    const items = ["alpha", "beta", "gamma", "delta", "epsilon"];
    await s.api(
      "PUT",
      "/v1/workflows/fan",
      fan("fan", items, { agent_type: "writer", payload: { q: "{{ item }}" } }, 2),
    );
    const run = await s.api<RunBody>("POST", "/v1/runs", { workflow_id: "fan" });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}?node=answer`);

    await nodeInState(page, "answer", "RUNNING");
    const node = page.locator('svg.graph g.node[data-node-id="answer"]');
    await node.locator('g.map-bar[data-total="5"][data-succeeded="0"][data-failed="0"]').waitFor();
    const details = page.getByRole("article", { name: "node answer" });
    const table = details.getByRole("table", { name: "items" });
    const states = () => table.locator("tbody tr td:nth-child(2)").allTextContents();
    // Two items are started (the counts' running), waiting for the test's worker to claim them.
    await expect.poll(states).toEqual(["PENDING", "PENDING", "PENDING", "PENDING", "PENDING"]);
    await table.locator("tbody tr", { hasText: "epsilon" }).waitFor();

    // One item ends: the bar and the table follow without a reload.
    await s.completeWriterTask({ answer: "first" });
    await node.locator('g.map-bar[data-succeeded="1"]').waitFor();
    await details.getByText("1 of 5 ended: 1 succeeded, 0 failed, 2 running, 2 pending").waitFor();
    // Whichever of the two running items the test's worker claimed first.
    const ended = table.locator("tbody tr", { hasText: '{"answer":"first"}' });
    await ended.waitFor();
    expect(await ended.locator("td").nth(1).textContent()).toBe("SUCCEEDED");
    const width = (cls: string) => node.locator(`rect.${cls}`).evaluate((r) => Number(r.getAttribute("width")));
    expect(await width("map-succeeded")).toBeCloseTo((await width("map-track")) / 5);
    await expectAccessible(page, "a run page with a map in progress");

    for (let i = 1; i < items.length; i++) await s.completeWriterTask({ answer: i });
    await nodeInState(page, "answer", "SUCCEEDED");
    await node.locator('g.map-bar[data-succeeded="5"]').waitFor();
    await runStatus(page, "SUCCEEDED");

    // An item of an agent has no run of its own: the table says which attempt ended it.
    await expect.poll(() => table.locator('tbody tr[data-index="0"] td').nth(3).textContent()).toBe("attempt 1");
    expect(await table.locator("tbody tr").getByRole("link").count()).toBe(0);
  });

  it("pages through the items 50 at a time", async () => {
    const s = await serve();
    const items = Array.from({ length: 60 }, (_, i) => `item-${i}`);
    await s.api("PUT", "/v1/workflows/wide", fan("wide", items, { agent_type: "echo" }));
    const run = await s.api<RunBody>("POST", "/v1/runs", { workflow_id: "wide" });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}?node=answer`);
    await nodeInState(page, "answer", "SUCCEEDED");
    const details = page.getByRole("article", { name: "node answer" });
    const table = details.getByRole("table", { name: "items" });
    const indexes = () => table.locator("tbody tr td:first-child").allTextContents();
    await expect.poll(indexes).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
    const pager = details.getByRole("navigation", { name: "item pages" });
    expect(await pager.getByRole("button", { name: "Previous" }).isDisabled()).toBe(true);

    await pager.getByRole("button", { name: "Next" }).click();
    await expect.poll(indexes).toEqual(Array.from({ length: 10 }, (_, i) => String(i + 50)));
    await pager.getByText("items 50–59 of 60").waitFor();
    expect(await pager.getByRole("button", { name: "Next" }).isDisabled()).toBe(true);
    await expectAccessible(page, "a map's second page of items");

    await pager.getByRole("button", { name: "Previous" }).click();
    await expect.poll(indexes).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
  });
});
