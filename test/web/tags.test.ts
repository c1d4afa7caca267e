/**
 * A run's tags on the admin page (DESIGN §16): beside its workflow in the list, under its title on its
 * page; and its priority (DESIGN §17) among its facts when it is not the default.
 */
import { describe, expect, it } from "vitest";
import { expectAccessible, serve, signIn } from "./helpers.js";

const ONE = { id: "one", nodes: [{ node_id: "draft", agent_type: "writer" }] };

describe("run tags on the page", { timeout: 90_000 }, () => {
  it("shows a run's tags in the list and on its page, as text", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/one", ONE);
    const tags = { customer: "<b>acme</b>", channel: "email" };
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "one", tags });
    await s.api("POST", "/v1/runs", { workflow_id: "one" });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs`);
    const row = page.locator(`tr[data-run-id="${run.run_id}"]`);
    const listed = row.getByRole("list", { name: "tags" });
    await listed.waitFor();
    expect(await listed.getByRole("listitem").allTextContents()).toEqual(["customer: <b>acme</b>", "channel: email"]);
    expect(await page.getByRole("list", { name: "tags" }).count()).toBe(1); // the untagged run shows none
    await page.goto(`${s.url}/#/runs/${run.run_id}`);
    const onPage = page.locator(".page-header").getByRole("list", { name: "tags" });
    await onPage.waitFor();
    expect(await onPage.getByRole("listitem").allTextContents()).toEqual(["customer: <b>acme</b>", "channel: email"]);
    expect(await onPage.locator("b").count()).toBe(0);
    await expectAccessible(page, "a run page with tags");
  });

  it("shows a run's priority among its facts when it is not the default 5", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/one", ONE);
    const urgent = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "one", priority: 1 });
    const plain = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "one" });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${urgent.run_id}`);
    const facts = page.locator("dl.facts");
    await facts.locator("dd.priority").waitFor();
    expect(await facts.locator("dd.priority").textContent()).toBe("1 (0 claimed first, 9 last; default 5)");
    await page.goto(`${s.url}/#/runs/${plain.run_id}`);
    await page.locator(".page-header code", { hasText: plain.run_id }).waitFor();
    expect(await facts.locator("dd.priority").count()).toBe(0);
  });
});
