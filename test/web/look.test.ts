/**
 * The page's look (issue 22 items 5 and 6): the JSON tree, times to the millisecond, reasons by
 * meaning, the dark theme and its toggle, and the page at a phone's width.
 */
import { mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { expectAccessible, nodeInState, runStatus, type Served, serve, signIn } from "./helpers.js";

const PAYLOAD = {
  order: { id: "A-1001", lines: [{ sku: "lamp-blue", quantity: 2, tags: ["blue", "desk"] }] },
  rush: true,
  note: null,
  amount: 59.8,
  text: "a long string ".repeat(20),
};

/** start succeeds, so charge runs and fails for good; refund's branch is not taken. */
const LOOK = {
  id: "look",
  nodes: [
    { node_id: "start", agent_type: "echo", payload: PAYLOAD, next_on_success: "charge", next_on_failure: "refund" },
    { node_id: "charge", agent_type: "broken", payload: { message: "card declined" } },
    { node_id: "refund", agent_type: "echo" },
  ],
};

/** A finished run of LOOK, its page open with `start` selected. */
async function failedRun(): Promise<Served & { runId: string }> {
  const s = await serve();
  await s.api("PUT", "/v1/workflows/look", LOOK);
  const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "look" });
  await signIn(s);
  await s.page.goto(`${s.url}/#/runs/${run.run_id}?node=start`);
  await runStatus(s.page, "FAILED");
  await nodeInState(s.page, "refund", "SKIPPED");
  return { ...s, runId: run.run_id };
}

const theme = (page: Page) => page.evaluate(() => document.documentElement.dataset.theme);
/** Waits until <html> has `data-theme="${value}"`. */
const themeBecomes = (page: Page, value: string) =>
  page.waitForFunction((v) => document.documentElement.dataset.theme === v, value);
const background = (page: Page) => page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);

describe("the admin page's look", { timeout: 120_000 }, () => {
  it("shows JSON as a tree that folds and copies, times to the ms, and reasons by meaning", async () => {
    const s = await failedRun();
    const { page } = s;
    const details = page.getByRole("article", { name: "node start" });
    const payload = details.locator(".json-view").first();

    // Deep containers start folded; a fold button says whether it is open.
    const line = payload.getByRole("button", { name: "lines[0] (3 keys)" });
    expect(await line.getAttribute("aria-expanded")).toBe("false");
    expect(await payload.textContent()).not.toContain("lamp-blue");
    await line.click();
    expect(await line.getAttribute("aria-expanded")).toBe("true");
    await payload.getByText('"lamp-blue"').waitFor();
    const order = payload.getByRole("button", { name: "order (2 keys)" });
    expect(await order.getAttribute("aria-expanded")).toBe("true");
    await order.click();
    expect(await order.getAttribute("aria-expanded")).toBe("false");
    await payload.getByText('"lamp-blue"').waitFor({ state: "detached" });
    // Values styled by type.
    expect(await payload.locator(".json-boolean").first().textContent()).toBe("true");
    expect(await payload.locator(".json-null").first().textContent()).toBe("null");
    expect(await payload.locator(".json-number").first().textContent()).toBe("59.8");

    await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: s.url });
    await payload.getByRole("button", { name: "Copy" }).click();
    await payload.getByRole("button", { name: "Copied" }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(JSON.stringify(PAYLOAD, null, 2));

    // Event data is a tree too, not a line of JSON.
    await details.locator("table.events .json-view").first().waitFor();
    // A wide events table scrolls inside its own box: the page itself never scrolls sideways.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(1360);

    const started = details.locator("time").first();
    expect(await started.textContent()).toMatch(/^\d\d:\d\d:\d\d\.\d{3} (just now|\d+ (s|min) ago)$/);
    const at = Date.parse((await started.getAttribute("datetime")) ?? "");
    expect(Number.isNaN(at)).toBe(false);
    expect(await started.getAttribute("title")).toContain(new Date(at).toISOString());

    const nodes = page.getByRole("table", { name: "nodes" });
    await nodes.getByRole("columnheader", { name: "Reason / error" }).waitFor();
    const reason = (node: string) =>
      nodes.locator("tr", { has: page.getByRole("link", { name: node }) }).locator("td.reason");
    expect(await reason("refund").textContent()).toBe("branch_not_taken");
    expect(await reason("refund").getAttribute("class")).toContain("muted");
    expect(await reason("charge").textContent()).toBe("card declined");
    expect(await reason("charge").getAttribute("class")).toContain("danger");
  });

  it("switches to dark and keeps it over a reload, follows the system, and stays accessible in both", async () => {
    const s = await failedRun();
    const { page } = s;
    expect(await theme(page)).toBe("light");
    await expectAccessible(page, "the run page, light");

    await page.getByLabel("Theme").selectOption("dark");
    await themeBecomes(page, "dark");
    expect(await background(page)).toBe("rgb(13, 17, 23)");
    await page.reload();
    await runStatus(page, "FAILED");
    expect(await theme(page)).toBe("dark");
    expect(await page.getByLabel("Theme").inputValue()).toBe("dark");
    await nodeInState(page, "refund", "SKIPPED");
    await expectAccessible(page, "the run page, dark");
    const dir = mkdtempSync(join(tmpdir(), "skein-look-"));
    await page.screenshot({ path: join(dir, "run-dark.png"), fullPage: true });
    expect(statSync(join(dir, "run-dark.png")).size).toBeGreaterThan(0);

    await page.goto(`${s.url}/#/runs`);
    await page.locator("table.runs tbody tr").first().waitFor();
    await expectAccessible(page, "the runs page, dark");
    await page.getByRole("link", { name: "Workflows" }).click();
    await page.getByRole("navigation", { name: "workflows" }).getByRole("link", { name: "look" }).click();
    await page.locator('.verdict[data-verdict="true"]').waitFor();
    await expectAccessible(page, "a workflow's page, dark");
    await page.goto(`${s.url}/#/runs`);
    await page.locator("table.runs tbody tr").first().waitFor();

    await page.getByLabel("Theme").selectOption("light");
    await themeBecomes(page, "light");
    expect(await background(page)).toBe("rgb(255, 255, 255)");

    // "System" follows prefers-color-scheme, also when it changes under the open page.
    await page.emulateMedia({ colorScheme: "dark" });
    await page.getByLabel("Theme").selectOption("system");
    await themeBecomes(page, "dark");
    await page.emulateMedia({ colorScheme: "light" });
    await themeBecomes(page, "light");
    await page.reload();
    await page.locator("table.runs tbody tr").first().waitFor();
    expect(await page.getByLabel("Theme").inputValue()).toBe("system");
  });

  it("fits a 390 px wide phone: no page overflow on the runs page or a run page", async () => {
    const s = await failedRun();
    const { page } = s;
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth);
    await page.getByRole("article", { name: "node start" }).waitFor();
    expect(await overflow()).toBeLessThanOrEqual(390);
    await page.getByText(/^History/).click();
    expect(await overflow()).toBeLessThanOrEqual(390);
    await expectAccessible(page, "a run page at 390 px");
    const dir = mkdtempSync(join(tmpdir(), "skein-look-"));
    await page.screenshot({ path: join(dir, "run-phone.png"), fullPage: true });
    expect(statSync(join(dir, "run-phone.png")).size).toBeGreaterThan(0);

    await page.goto(`${s.url}/#/runs`);
    await page.locator("table.runs tbody tr").first().waitFor();
    expect(await overflow()).toBeLessThanOrEqual(390);
    await expectAccessible(page, "the runs page at 390 px");
  });
});
