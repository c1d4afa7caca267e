/**
 * The runs list's bulk actions act on the current filter (DESIGN §16): every run it matches, on
 * every page, not rows selected on one. The bar counts them (a dry run), the dialog repeats the
 * count, and confirming cancels or retries exactly those; an admin's only.
 */
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { expectAccessible, PUBLISH, serve, signIn, TOKENS } from "./helpers.js";

interface RunBody {
  run_id: string;
  status: string;
}

/** Waits until the list shows exactly these runs (any order), each in its status. */
async function rowsAre(page: Page, expected: Record<string, string>): Promise<void> {
  await page.waitForFunction((want) => {
    const rows = [...document.querySelectorAll<HTMLElement>("table.runs tbody tr")];
    return (
      rows.length === Object.keys(want).length && rows.every((r) => want[r.dataset.runId ?? ""] === r.dataset.status)
    );
  }, expected);
}

const all = (ids: string[], status: string) => Object.fromEntries(ids.map((id) => [id, status]));

describe("bulk actions on the runs list", { timeout: 90_000 }, () => {
  it("cancels, then retries, every run the filter matches, after a confirmation that repeats the count", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    // The draft waits for an external writer: every run stays RUNNING.
    const start = (tags?: Record<string, string>) =>
      s.api<RunBody>("POST", "/v1/runs", { workflow_id: "publish", input: { topic: "t" }, ...(tags ? { tags } : {}) });
    const tagged = [];
    for (let i = 0; i < 3; i++) tagged.push((await start({ batch: "x" })).run_id);
    const others = [(await start()).run_id, (await start({ batch: "y" })).run_id];
    await signIn(s);
    const { page } = s;
    await rowsAre(page, { ...all(tagged, "RUNNING"), ...all(others, "RUNNING") });
    // No row is selected any more: the actions take the filter.
    expect(await page.locator("table.runs input[type=checkbox]").count()).toBe(0);
    const bar = page.getByRole("region", { name: "act on every matching run" });
    await bar.getByRole("button", { name: "Cancel 5 matching runs…" }).waitFor();

    const search = page.getByRole("search", { name: "search runs" });
    await search.getByLabel("Tag").fill("batch:x");
    await search.getByRole("button", { name: "Search" }).click();
    await rowsAre(page, all(tagged, "RUNNING"));
    expect(page.url()).toContain("tag=batch%3Ax");
    const cancelAll = bar.getByRole("button", { name: "Cancel 3 matching runs…" });
    await cancelAll.waitFor();
    expect(await bar.getByRole("button", { name: "Retry 0 matching runs…" }).isDisabled()).toBe(true);

    await cancelAll.click();
    const cancel = page.getByRole("dialog", { name: "Cancel 3 matching runs?" });
    await cancel.waitFor();
    await expectAccessible(page, "the bulk cancel dialog");
    await cancel.getByRole("button", { name: "Cancel 3 runs" }).click();
    await cancel.waitFor({ state: "detached" });
    await rowsAre(page, all(tagged, "CANCELLED"));
    for (const id of others) expect((await s.api<RunBody>("GET", `/v1/runs/${id}`)).status).toBe("RUNNING");
    await bar.getByRole("button", { name: "Cancel 0 matching runs…" }).waitFor();

    await bar.getByRole("button", { name: "Retry 3 matching runs…" }).click();
    const retry = page.getByRole("dialog", { name: "Retry 3 matching runs?" });
    await retry.getByRole("button", { name: "Retry 3 runs" }).click();
    await retry.waitFor({ state: "detached" });
    await rowsAre(page, all(tagged, "RUNNING"));
    await expectAccessible(page, "the runs list with its bulk actions");

    // Pause them all, then resume them: the counts follow (paused runs are no longer pausable).
    await bar.getByRole("button", { name: "Pause 3 matching runs…" }).click();
    const pause = page.getByRole("dialog", { name: "Pause 3 matching runs?" });
    await pause.getByRole("button", { name: "Pause 3 runs" }).click();
    await pause.waitFor({ state: "detached" });
    await bar.getByRole("button", { name: "Resume 3 matching runs…" }).waitFor();
    expect(await bar.getByRole("button", { name: "Pause 0 matching runs…" }).isDisabled()).toBe(true);
    for (const id of tagged) expect((await s.api<{ paused: unknown }>("GET", `/v1/runs/${id}`)).paused).not.toBeNull();
    await bar.getByRole("button", { name: "Resume 3 matching runs…" }).click();
    const resume = page.getByRole("dialog", { name: "Resume 3 matching runs?" });
    await resume.getByRole("button", { name: "Resume 3 runs" }).click();
    await bar.getByRole("button", { name: "Pause 3 matching runs…" }).waitFor();
  });

  it("forks every run of the chosen workflow from a node picked in the dialog", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    const sources = [];
    for (let i = 0; i < 2; i++) {
      sources.push(
        (await s.api<RunBody>("POST", "/v1/runs", { workflow_id: "publish", input: { topic: `t${i}` } })).run_id,
      );
    }
    await signIn(s);
    const { page } = s;
    await rowsAre(page, all(sources, "RUNNING"));
    const bar = page.getByRole("region", { name: "act on every matching run" });
    // Forking needs one workflow's nodes: no fork button before the filter names one.
    await bar.getByRole("button", { name: "Cancel 2 matching runs…" }).waitFor();
    expect(await bar.getByRole("button", { name: /^Fork/ }).count()).toBe(0);
    await page.getByLabel("Workflow").selectOption("publish");
    await bar.getByRole("button", { name: "Fork 2 matching runs…" }).click();
    const fork = page.getByRole("dialog", { name: "Fork 2 matching runs?" });
    await fork.getByLabel("From node").selectOption("draft");
    await expectAccessible(page, "the bulk fork dialog");
    await fork.getByRole("button", { name: "Fork 2 runs" }).click();
    await fork.waitFor({ state: "detached" });
    const { runs } = await s.api<{
      runs: { run_id: string; forked_from: { run_id: string; node_id: string } | null }[];
    }>("GET", "/v1/runs?workflow_id=publish");
    const forks = runs.filter((r) => r.forked_from !== null);
    expect(forks.map((r) => r.forked_from?.run_id).sort()).toEqual([...sources].sort());
    expect(forks.every((r) => r.forked_from?.node_id === "draft")).toBe(true);
  });

  it("offers no bulk action to a reviewer", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    const run = await s.api<RunBody>("POST", "/v1/runs", { workflow_id: "publish", input: { topic: "t" } });
    // The page asks who the token is before it offers bulk actions.
    const me = s.page.waitForResponse((r) => r.url().endsWith("/v1/me") && r.ok());
    await signIn(s, TOKENS.alice);
    await me;
    await rowsAre(s.page, { [run.run_id]: "RUNNING" });
    expect(await s.page.getByRole("region", { name: "act on every matching run" }).count()).toBe(0);
    expect(s.requests.filter((url) => url.endsWith("/v1/runs/bulk"))).toEqual([]);
  });
});
