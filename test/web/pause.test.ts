/**
 * Pausing on the admin page (DESIGN §16): pause a run with a reason, find it with the list's
 * paused filter, resume it; a node whose retries ran out (on_exhausted: pause) is named on the
 * run page and failed from there, taking its failure path.
 */
import { describe, expect, it } from "vitest";
import { expectAccessible, runStatus, serve, signIn, TOKENS } from "./helpers.js";

const TWO = {
  id: "two",
  nodes: [
    { node_id: "draft", agent_type: "writer", next_on_success: "publish" },
    { node_id: "publish", agent_type: "writer" },
  ],
};
const OUTAGE = {
  id: "outage",
  nodes: [{ node_id: "call", agent_type: "writer", retry_count: 0, on_exhausted: "pause" }],
};

describe("pausing runs on the page", { timeout: 90_000 }, () => {
  it("pauses a run with a reason, lists it as paused, and resumes it", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/two", TWO);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "two" });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}`);
    await runStatus(page, "RUNNING");
    await page.getByRole("button", { name: "Pause run…" }).click();
    const dialog = page.getByRole("dialog");
    await dialog.getByLabel("Reason (optional)").fill("provider outage");
    await dialog.getByRole("button", { name: "Pause the run" }).click();
    const note = page.getByRole("status").filter({ hasText: "Paused by ops" });
    await note.waitFor();
    expect(await note.textContent()).toContain(": provider outage.");
    await expectAccessible(page, "a paused run's page");

    await page.goto(`${s.url}/#/runs?status=PAUSED`);
    await page.locator(`tr[data-run-id="${run.run_id}"]`).waitFor();
    expect(await page.locator("tr[data-run-id]").count()).toBe(1);

    await page.goto(`${s.url}/#/runs/${run.run_id}`);
    await page.getByRole("button", { name: "Resume run…" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Resume the run" }).click();
    await page.getByRole("button", { name: "Pause run…" }).waitFor();
    expect(await page.getByRole("status").filter({ hasText: "Paused by" }).count()).toBe(0);
    expect(await s.completeWriterTask()).toMatchObject({ run_id: run.run_id, node_id: "draft" });
  });

  it("names the node whose retries ran out, and fails it from the node's details", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/outage", OUTAGE);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "outage" });
    const { tasks } = await s.api<{ tasks: { execution_id: string; attempt: number }[] }>(
      "POST",
      "/v1/tasks/claim",
      { agent_types: ["writer"], worker_id: "web-test", wait_seconds: 15 },
      TOKENS.agent,
    );
    const task = tasks[0] as { execution_id: string; attempt: number };
    await s.api(
      "POST",
      `/v1/tasks/${task.execution_id}/fail`,
      { attempt: task.attempt, worker_id: "web-test", error: { message: "503 from the provider" }, retryable: true },
      TOKENS.agent,
    );
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}`);
    const note = page.getByRole("status").filter({ hasText: "ran out of retries" });
    await note.waitFor();
    expect(await note.textContent()).toContain("Paused by engine");
    await note.getByRole("link", { name: "call" }).click();
    await page.getByRole("button", { name: "Fail this node…" }).click();
    const dialog = page.getByRole("dialog");
    await dialog.getByLabel("Reason (optional)").fill("down all day");
    await dialog.getByRole("button", { name: "Fail the node" }).click();
    await runStatus(page, "FAILED");
    const done = await s.api<{ nodes: { error: { message: string } | null }[] }>("GET", `/v1/runs/${run.run_id}`);
    expect(done.nodes[0]?.error?.message).toBe("503 from the provider (failed by ops: down all day)");
  });
});
