/** The runs list: search by text and a part of the id, a time range, the extra columns (bulk actions: runs-bulk.test.ts). */
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { expectAccessible, PUBLISH, serve, signIn } from "./helpers.js";

interface RunBody {
  run_id: string;
  status: string;
}

/** Waits until the list shows exactly these runs (any order), each in its status when given. */
async function rowsAre(page: Page, expected: Record<string, string | null>): Promise<void> {
  await page.waitForFunction((want) => {
    const rows = [...document.querySelectorAll<HTMLElement>("table.runs tbody tr")];
    const ids = Object.keys(want);
    return (
      rows.length === ids.length &&
      rows.every((r) => {
        const id = r.dataset.runId ?? "";
        return id in want && (want[id] === null || want[id] === r.dataset.status);
      })
    );
  }, expected);
}

describe("runs list search", { timeout: 90_000 }, () => {
  it("searches by text, a part of the id and time, shows reviews and reasons", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    const start = (topic: string) => s.api<RunBody>("POST", "/v1/runs", { workflow_id: "publish", input: { topic } });
    const alpha = await start("alpha Kittens");
    const beta = await start("beta puppies");
    const gamma = await start("gamma kittens");
    // One run's draft is written: it waits for a review.
    const reviewed = await s.completeWriterTask();
    await signIn(s);
    const { page } = s;
    await rowsAre(page, { [alpha.run_id]: "RUNNING", [beta.run_id]: "RUNNING", [gamma.run_id]: "RUNNING" });
    for (const name of ["Waiting reviews", "Error reason", "Duration"]) {
      await page.getByRole("columnheader", { name }).waitFor();
    }
    await page.locator(`tr[data-run-id="${reviewed.run_id}"] td.reviews-cell`, { hasText: /^1$/ }).waitFor();
    // The column asks for the shown runs' reviews only, not the whole inbox.
    const asked = s.requests.filter((url) => url.includes("/v1/reviews?run_ids="));
    expect(asked.some((url) => decodeURIComponent(url).includes(reviewed.run_id))).toBe(true);

    // Text in the input, case-insensitively; kept in the URL across a reload.
    const search = page.getByRole("search", { name: "search runs" });
    await search.getByLabel("Text in input or output").fill("KITTENS");
    await search.getByRole("button", { name: "Search" }).click();
    await rowsAre(page, { [alpha.run_id]: null, [gamma.run_id]: null });
    expect(page.url()).toContain("q=KITTENS");
    await page.reload();
    await rowsAre(page, { [alpha.run_id]: null, [gamma.run_id]: null });
    expect(await search.getByLabel("Text in input or output").inputValue()).toBe("KITTENS");

    // A part of a run id: the end the list shows, copied from the row as it reads ("…" and all).
    // Ids are UUIDv7, whose start (a timestamp) these runs share.
    const all = { [alpha.run_id]: null, [beta.run_id]: null, [gamma.run_id]: null };
    await search.getByRole("button", { name: "Clear" }).click();
    await rowsAre(page, all);
    const shown = await page.locator(`tr[data-run-id="${beta.run_id}"] td a code`).textContent();
    expect(shown).toBe(`…${beta.run_id.slice(-12)}`);
    await search.getByLabel("Run id contains").fill(shown ?? "");
    await search.getByRole("button", { name: "Search" }).click();
    await rowsAre(page, { [beta.run_id]: null });
    // A piece of the middle, in capitals, finds it too; the shared start finds them all.
    await search.getByLabel("Run id contains").fill(beta.run_id.slice(19, 27).toUpperCase());
    await search.getByRole("button", { name: "Search" }).click();
    await rowsAre(page, { [beta.run_id]: null });
    await search.getByLabel("Run id contains").fill(beta.run_id.slice(0, 4));
    await search.getByRole("button", { name: "Search" }).click();
    await rowsAre(page, all);

    // A time range that excludes every run, then one that holds them all.
    await search.getByRole("button", { name: "Clear" }).click();
    await rowsAre(page, all);
    await search.getByLabel("Created from").fill("2099-01-01T00:00:00");
    await search.getByRole("button", { name: "Search" }).click();
    await page.getByText("No runs match.").waitFor();
    await search.getByLabel("Created from").fill("2000-01-01T00:00:00");
    await search.getByLabel("to").fill("2099-01-01T00:00:00");
    await search.getByRole("button", { name: "Search" }).click();
    await rowsAre(page, all);
    await expectAccessible(page, "the runs list with its search");
  });

  it("keeps what is typed right after a search or a clear, before the list follows them", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    const kittens = await s.api<RunBody>("POST", "/v1/runs", { workflow_id: "publish", input: { topic: "kittens" } });
    const puppies = await s.api<RunBody>("POST", "/v1/runs", { workflow_id: "publish", input: { topic: "puppies" } });
    await signIn(s);
    const { page } = s;
    await rowsAre(page, { [kittens.run_id]: null, [puppies.run_id]: null });

    // Searching, then typing in the same moment: the search's own change of the URL comes after.
    const typeRightAfter = (button: string, typed: string) =>
      page.evaluate(
        ({ button, typed }) => {
          const form = document.querySelector<HTMLFormElement>("form.run-search");
          const field = form?.querySelector<HTMLInputElement>('input[name="q"]');
          const pressed = [...(form?.querySelectorAll("button") ?? [])].find((b) => b.textContent === button);
          if (!field || !pressed) throw new Error("no search form");
          pressed.click();
          field.value = typed;
          field.dispatchEvent(new Event("input", { bubbles: true }));
        },
        { button, typed },
      );
    const text = page.getByRole("search", { name: "search runs" }).getByLabel("Text in input or output");
    await text.fill("kittens");
    await typeRightAfter("Search", "puppies");
    await rowsAre(page, { [kittens.run_id]: null });
    expect(await text.inputValue()).toBe("puppies");

    await typeRightAfter("Clear", "kitt");
    await rowsAre(page, { [kittens.run_id]: null, [puppies.run_id]: null });
    expect(await text.inputValue()).toBe("kitt");
  });
});
