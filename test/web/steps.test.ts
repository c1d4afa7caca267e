/**
 * A node's durable steps in the admin page (DESIGN §14.1): the node's details list what its
 * attempts recorded with task.step (here a worker's POST /v1/tasks/{execution_id}/steps), each
 * with the attempt that recorded it, its size and its output; a node that recorded none has no
 * Steps section.
 */
import { describe, expect, it } from "vitest";
import { expectAccessible, nodeInState, runStatus, serve, signIn, TOKENS } from "./helpers.js";

describe("durable steps in the admin page", { timeout: 90_000 }, () => {
  it("lists a node's recorded steps in its details", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/stepped", {
      id: "stepped",
      nodes: [
        { node_id: "draft", agent_type: "writer" },
        { node_id: "after", agent_type: "echo", depends_on: ["draft"] },
      ],
    });
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "stepped" });
    const { tasks } = await s.api<{ tasks: { execution_id: string; attempt: number }[] }>(
      "POST",
      "/v1/tasks/claim",
      { agent_types: ["writer"], worker_id: "web-test", wait_seconds: 15 },
      TOKENS.agent,
    );
    const task = tasks[0];
    if (!task) throw new Error("no writer task became ready");
    const record = (name: string, output: unknown) =>
      s.api(
        "POST",
        `/v1/tasks/${task.execution_id}/steps`,
        { attempt: 1, worker_id: "web-test", name, output },
        TOKENS.agent,
      );
    await record("outline", { sections: 3 });
    await record("model:1", "A first draft");
    await s.api(
      "POST",
      `/v1/tasks/${task.execution_id}/complete`,
      { attempt: 1, worker_id: "web-test", output: { text: "done" } },
      TOKENS.agent,
    );

    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}?node=draft`);
    await nodeInState(page, "draft", "SUCCEEDED");
    await runStatus(page, "SUCCEEDED");
    const details = page.getByRole("article", { name: "node draft" });
    const table = details.getByRole("table", { name: "durable steps" });
    await table.waitFor();
    const rows = table.locator("tbody tr");
    await expect.poll(() => rows.locator("td:first-child").allTextContents()).toEqual(["outline", "model:1"]);
    expect(await rows.nth(0).locator("td").nth(1).textContent()).toBe("1");
    expect(await rows.nth(0).locator("td").nth(3).textContent()).toBe("14 B");
    expect(await rows.nth(1).locator("td").nth(4).textContent()).toContain("A first draft");
    await expectAccessible(page, "a run page with a node's steps");

    // A node that recorded no step has no Steps section.
    await page.goto(`${s.url}/#/runs/${run.run_id}?node=after`);
    const after = page.getByRole("article", { name: "node after" });
    await after.getByRole("heading", { name: "Events" }).waitFor();
    expect(await after.getByRole("region", { name: "steps" }).count()).toBe(0);
  });
});
