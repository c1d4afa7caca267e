/** The Schedules page: the list, a schedule's next fire times and last runs, pause and resume. */
import { describe, expect, it } from "vitest";
import { serve, signIn, TOKENS } from "./helpers.js";

const GREET = { id: "greet", nodes: [{ node_id: "hello", agent_type: "echo" }] };

/** The next `count` New Year's mornings, 09:00 in Paris (08:00 UTC), after `now`. */
function newYearMornings(now: number, count: number): string[] {
  const times: string[] = [];
  for (let year = new Date(now).getUTCFullYear(); times.length < count; year++) {
    const at = Date.UTC(year, 0, 1, 8);
    if (at > now) times.push(new Date(at).toISOString());
  }
  return times;
}

interface ScheduleAnswer {
  paused: boolean;
  next_fire_at: number | null;
}

describe("the Schedules page", { timeout: 90_000 }, () => {
  it("lists schedules, shows the next fire times and last runs, pauses and resumes", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/greet", GREET);
    await s.api("PUT", "/v1/schedules/new-year", {
      workflow_id: "greet",
      cron: "0 9 1 1 *",
      timezone: "Europe/Paris",
      input: { greeting: "<b>happy</b> new year" },
    });
    // Every second, so that the page has last runs to show without waiting long.
    await s.api("PUT", "/v1/schedules/every-second", { workflow_id: "greet", cron: "* * * * * *" });
    await signIn(s);
    const { page } = s;
    await page.getByRole("navigation", { name: "pages" }).getByRole("link", { name: "Schedules" }).click();

    const list = page.getByRole("table", { name: "schedules" });
    const row = list.locator('tr[data-schedule-id="new-year"]');
    await row.waitFor();
    expect(await list.locator("tbody tr").count()).toBe(2);
    expect(await row.locator("td").nth(1).textContent()).toBe("greet");
    expect(await row.locator("td").nth(2).textContent()).toBe("0 9 1 1 * Europe/Paris");
    expect(await row.locator("td").nth(4).textContent()).toBe("active");

    // One schedule: its next 5 fire times (09:00 in Paris each New Year's Day) and its input as text.
    const before = Date.now();
    await row.getByRole("link", { name: "new-year" }).click();
    const detail = page.getByRole("region", { name: "schedule new-year" });
    const times = detail.getByRole("list", { name: "next fire times" }).locator("time");
    await times.first().waitFor();
    const shown = await times.evaluateAll((nodes) => nodes.map((n) => n.getAttribute("datetime")));
    expect(shown).toEqual(newYearMornings(before, 5));
    expect(await detail.locator("pre.json").textContent()).toContain('"greeting": "<b>happy</b> new year"');
    expect(await detail.locator("b").count()).toBe(0);
    expect(await detail.getByText("No runs yet.").count()).toBe(1);

    // The other fires every second: its last runs appear, each linking to the run.
    await list.locator('tr[data-schedule-id="every-second"]').getByRole("link", { name: "every-second" }).click();
    const every = page.getByRole("region", { name: "schedule every-second" });
    const lastRun = every.getByRole("table", { name: "last runs" }).locator("tr").first();
    await lastRun.waitFor();
    const runId = await lastRun.getAttribute("data-run-id");
    const run = await s.api<{ schedule_id: string }>("GET", `/v1/runs/${runId}`);
    expect(run.schedule_id).toBe("every-second");
    // The run page names the schedule that started it, and links back.
    await lastRun.getByRole("link").click();
    await page.locator("dl.facts dd a", { hasText: "every-second" }).click();
    await page.getByRole("region", { name: "schedule every-second" }).waitFor();

    // Pause: the server's answer is shown, and the list says so.
    await every.getByRole("button", { name: "Pause" }).click();
    await every.getByRole("status").getByText("Paused every-second: no slot fires until it is resumed.").waitFor();
    await list.locator('tr[data-schedule-id="every-second"] .badge', { hasText: "paused" }).waitFor();
    expect(await s.api<ScheduleAnswer>("GET", "/v1/schedules/every-second")).toMatchObject({
      paused: true,
      next_fire_at: null,
    });

    // Resume: from the next slot after now.
    await every.getByRole("button", { name: "Resume" }).click();
    await every
      .getByRole("status")
      .getByText(/^Resumed every-second: the next slot fires at /)
      .waitFor();
    await every.getByRole("button", { name: "Pause" }).waitFor();
    const resumed = await s.api<ScheduleAnswer>("GET", "/v1/schedules/every-second");
    expect(resumed.paused).toBe(false);
    expect(resumed.next_fire_at).not.toBeNull();
    expect(page.url()).toContain("#/schedules/every-second");
  });

  it("shows a reviewer's refused pause as an error and changes nothing", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/greet", GREET);
    await s.api("PUT", "/v1/schedules/new-year", { workflow_id: "greet", cron: "0 9 1 1 *" });
    await signIn(s, TOKENS.alice);
    const { page } = s;
    await page.goto(`${s.url}/#/schedules/new-year`);
    const detail = page.getByRole("region", { name: "schedule new-year" });
    await detail.getByRole("button", { name: "Pause" }).click();
    await detail.locator(".error-note", { hasText: "Not changed" }).waitFor();
    expect(await s.api<ScheduleAnswer>("GET", "/v1/schedules/new-year")).toMatchObject({ paused: false });
  });
});
