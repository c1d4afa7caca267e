/**
 * Event triggers on the admin page (DESIGN §17): a workflow's page lists its triggers (event,
 * key, input), and the page of a run a trigger started names the event that started it.
 */
import { describe, expect, it } from "vitest";
import { expectAccessible, serve, signIn } from "./helpers.js";

const INVOICE = {
  id: "invoice",
  triggers: [
    { event: "order.paid", key: "vip", input: { order: "{{ event.key }}", vip: true } },
    { event: "order.paid" },
  ],
  // `writer` is an external agent here: the run waits at its first node.
  nodes: [{ node_id: "bill", agent_type: "writer" }],
};

describe("triggers on the admin page", { timeout: 90_000 }, () => {
  it("lists a workflow's triggers on its page, and a run's page says which event started it", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/invoice", INVOICE);
    const published = await s.api<{ event_id: string; started: { run_id: string }[] }>("POST", "/v1/events", {
      name: "order.paid",
      key: "o-1",
      payload: { total: 12 },
      idempotency_key: "pay-1",
    });
    await signIn(s);
    const { page } = s;

    await page.goto(`${s.url}/#/workflows/invoice`);
    const table = page.getByRole("table", { name: "triggers" });
    await table.waitFor();
    const rows = await table
      .locator("tbody tr")
      .evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent?.trim())));
    expect(rows).toEqual([
      ["order.paid", "vip", JSON.stringify(INVOICE.triggers[0]?.input)],
      ["order.paid", "any", "the event's payload"],
    ]);
    await expectAccessible(page, "a workflow's page with triggers");

    const runId = published.started[0]?.run_id as string;
    await page.goto(`${s.url}/#/runs/${runId}`);
    const fact = page.locator("dd.triggered-by");
    await fact.waitFor();
    expect(await fact.textContent()).toBe("event order.paid, key o-1, idempotency key pay-1");
  });
});
