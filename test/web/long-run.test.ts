/**
 * A long loop's run page: a node visited 40 times leaves hundreds of events. The page draws the
 * latest 100 of them, with the earlier ones on demand, and the timeline's row per visit scrolls
 * in its own box beside the node's details instead of stretching the page.
 */
import { describe, expect, it } from "vitest";
import { expectAccessible, runStatus, serve, signIn } from "./helpers.js";

const VISITS = 40;

/** `tick` goes back to itself until its visits run out, which fails the run: a loop that never converges. */
const SPIN = {
  id: "spin",
  nodes: [{ node_id: "tick", agent_type: "echo", max_visits: VISITS, next_on_success: "tick" }],
};

describe("a long run's page", { timeout: 90_000 }, () => {
  it("draws the latest 100 events with the earlier on demand, and scrolls the timeline in its own box", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/spin", SPIN);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "spin" });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}`);
    await runStatus(page, "FAILED");

    const stored = await s.api<{ events: unknown[] }>("GET", `/v1/runs/${run.run_id}/events?limit=1000`);
    const total = stored.events.length;
    expect(total).toBeGreaterThan(3 * VISITS);

    const history = page.locator("details", { has: page.locator("summary", { hasText: "History" }) });
    await history.locator("summary").click();
    await history.getByText(`The latest 100 of ${total} events.`).waitFor();
    expect(await history.locator("table.events tbody tr").count()).toBe(100);
    await history.getByRole("button", { name: `Show ${total - 100} earlier` }).click();
    await history
      .locator("table.events tbody tr")
      .nth(total - 1)
      .waitFor();
    expect(await history.locator("table.events tbody tr").count()).toBe(total);
    expect(await history.getByText(/^The latest/).count()).toBe(0);

    // One row per visit, and one for the 41st, failed before it started (max_visits_exceeded); the chart is taller than its box, which scrolls, and the page does not grow with it.
    const rows = page.locator("svg.timeline g.timeline-row");
    expect(await rows.count()).toBe(VISITS + 1);
    const box = await page
      .locator(".timeline-scroll")
      .evaluate((el) => ({ client: el.clientHeight, scroll: el.scrollHeight }));
    expect(box.scroll).toBeGreaterThan(box.client);

    // The last run visit's bar, scrolled to inside the box, selects the node: its details list its latest events.
    await rows
      .nth(VISITS - 1)
      .locator("g.timeline-bar")
      .click();
    const details = page.getByRole("article", { name: "node tick" });
    await details.getByText(/The latest 100 of \d+ events\./).waitFor();
    expect(await details.locator("table.events tbody tr").count()).toBe(100);
    await expectAccessible(page, "a long run's page");
  });
});
