/**
 * A node's progress on the run page (DESIGN §11.6, §15): its text so far under its details, as
 * text only, live while it runs, replayed after a reload and after the run ended.
 */
import { describe, expect, it } from "vitest";
import { nodeInState, serve, signIn, TOKENS } from "./helpers.js";

const ONE = { id: "one", nodes: [{ node_id: "draft", agent_type: "writer" }] };

describe("progress on the run page", { timeout: 90_000 }, () => {
  it("shows the selected node's streamed text, live, across a reload, and after the node ended", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/one", ONE);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "one", input: {} });
    const { tasks } = await s.api<{ tasks: { execution_id: string; attempt: number }[] }>(
      "POST",
      "/v1/tasks/claim",
      { agent_types: ["writer"], worker_id: "web-test", wait_seconds: 15 },
      TOKENS.agent,
    );
    const task = tasks[0];
    if (!task) throw new Error("no writer task");
    const progress = (value: unknown) =>
      s.api<{ delivered: boolean }>(
        "POST",
        `/v1/tasks/${task.execution_id}/progress`,
        { attempt: task.attempt, worker_id: "web-test", progress: value },
        TOKENS.agent,
      );

    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}?node=draft`);
    await nodeInState(page, "draft", "RUNNING");
    const details = page.getByRole("article", { name: "node draft" });
    await details.getByText(`${run.run_id}:draft:1`).waitFor();

    expect(await progress("page 3 of 10")).toEqual({ delivered: true });
    const box = details.getByRole("log", { name: "progress" });
    await box.filter({ hasText: /^page 3 of 10$/ }).waitFor();

    // Text comes as deltas, joined on the page; as text, never markup.
    const first = "Chapter 1\nIt was a <b>dark</b>";
    const second = ' night <img src=x onerror="alert(1)">';
    expect(await progress({ delta: first })).toEqual({ delivered: true });
    expect(await progress({ delta: second })).toEqual({ delivered: true });
    await box.filter({ hasText: "onerror" }).waitFor();
    expect(await box.textContent()).toBe(first + second);
    expect(await box.locator("b, img").count()).toBe(0);

    // A reload mid-stream shows the text so far (kept, replayed), and goes on from there.
    await page.reload();
    await box.filter({ hasText: "onerror" }).waitFor();
    expect(await progress({ delta: " The end." })).toEqual({ delivered: true });
    await box.filter({ hasText: "The end." }).waitFor();
    expect(await box.textContent()).toBe(`${first + second} The end.`);

    await s.api(
      "POST",
      `/v1/tasks/${task.execution_id}/complete`,
      { attempt: task.attempt, worker_id: "web-test", output: { done: true } },
      TOKENS.agent,
    );
    await nodeInState(page, "draft", "SUCCEEDED");
    expect(await progress("late")).toEqual({ delivered: false });
    // Loaded again after the run ended, the page shows what the node streamed.
    await page.reload();
    await nodeInState(page, "draft", "SUCCEEDED");
    await box.filter({ hasText: "The end." }).waitFor();
    expect(await box.textContent()).toBe(`${first + second} The end.`);
  });
});
