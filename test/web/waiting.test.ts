/**
 * A node ready for an agent type nothing serves says so on the run page; once a worker claims the
 * type, the editor's check no longer warns that no agent is registered for it, and a node behind
 * more urgent ready work of its type says that in the run's nodes table.
 */
import { describe, expect, it } from "vitest";
import { nodeInState, serve, signIn, TOKENS } from "./helpers.js";

const ONE = { id: "one", nodes: [{ node_id: "draft", agent_type: "writer" }] };

interface Check {
  warnings: { path: string; message: string }[];
}

describe("a node waiting for an agent", { timeout: 90_000 }, () => {
  it("says what it waits for on the run page, and a worker's claim counts as serving its type", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/one", ONE);
    const before = await s.api<Check>("POST", "/v1/workflows/validate", ONE);
    expect(before.warnings.map((w) => w.message)).toEqual([
      expect.stringContaining('no agent is registered for agent_type "writer"'),
    ]);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "one", input: {} });

    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}?node=draft`);
    await nodeInState(page, "draft", "PENDING");
    const details = page.getByRole("article", { name: "node draft" });
    await details.getByText('no engine or worker serves agent_type "writer"').waitFor();

    const { tasks } = await s.api<{ tasks: unknown[] }>(
      "POST",
      "/v1/tasks/claim",
      { agent_types: ["writer"], worker_id: "web-test", wait_seconds: 15 },
      TOKENS.agent,
    );
    expect(tasks).toHaveLength(1);
    await nodeInState(page, "draft", "RUNNING");
    expect(await details.getByText("no engine or worker serves").count()).toBe(0);
    expect((await s.api<Check>("POST", "/v1/workflows/validate", ONE)).warnings).toEqual([]);

    // Served now, a ready node waits behind more urgent ready work of its type, and says so.
    await s.api("POST", "/v1/runs", { workflow_id: "one", input: {}, priority: 1 });
    const low = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "one", input: {}, priority: 8 });
    await page.goto(`${s.url}/#/runs/${low.run_id}`);
    await nodeInState(page, "draft", "PENDING");
    const row = page.getByRole("table", { name: "nodes" }).getByRole("row").filter({ hasText: "draft" });
    await row.getByText('behind 1 ready visit of agent type "writer" of a more urgent priority').waitFor();
  });
});
