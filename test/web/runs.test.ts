/** The admin page's runs: starting one from its workflow, its live graph, the list, cancel and retry. */
import { describe, expect, it } from "vitest";
import {
  documentStillMarked,
  markDocument,
  nodeInState,
  PUBLISH,
  runStatus,
  type Served,
  serve,
  signIn,
} from "./helpers.js";

interface RunBody {
  run_id: string;
  status: string;
  input: unknown;
  nodes: { node_id: string; state: string; visit: number }[];
}

const QUICK = { id: "quick", nodes: [{ node_id: "only", agent_type: "echo" }] };

/** The run id in the page's URL (`#/runs/<id>`). */
function runIdOf(s: Served): string {
  const match = /#\/runs\/([^?]+)/.exec(s.page.url());
  if (!match?.[1]) throw new Error(`not on a run page: ${s.page.url()}`);
  return decodeURIComponent(match[1]);
}

describe("runs in the admin page", { timeout: 90_000 }, () => {
  it("starts a run from the workflow page; its nodes turn green in the graph as it moves, without a reload", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    await signIn(s);
    const { page } = s;
    await page.getByRole("navigation", { name: "pages" }).getByRole("link", { name: "Workflows" }).click();
    await page.getByRole("navigation", { name: "workflows" }).getByRole("link", { name: "publish" }).click();
    await markDocument(page);

    // The input form comes from the workflow's input_schema.
    await page.getByLabel("topic *").fill("durable agents");
    await page.getByRole("button", { name: "Start run" }).click();

    // The draft waits for the external writer (this test), then succeeds when the test completes it.
    await nodeInState(page, "draft", "PENDING");
    const runId = runIdOf(s);
    expect((await s.api<RunBody>("GET", `/v1/runs/${runId}`)).input).toEqual({ topic: "durable agents" });
    expect(await s.completeWriterTask()).toEqual({ run_id: runId, node_id: "draft" });
    const draft = await nodeInState(page, "draft", "SUCCEEDED");
    expect(await draft.locator("rect").evaluate((rect) => getComputedStyle(rect).fill)).toBe("rgb(218, 251, 225)");
    await nodeInState(page, "check", "IN_REVIEW");
    expect(await page.locator('g.edge[data-from="draft"][data-to="check"]').getAttribute("data-taken")).toBe("true");

    await s.api("POST", `/v1/runs/${runId}/nodes/check/review`, { decision: "approve" });
    await nodeInState(page, "publish", "SUCCEEDED");
    await nodeInState(page, "rework", "SKIPPED");
    await runStatus(page, "SUCCEEDED");
    expect(await documentStillMarked(page)).toBe(true);

    // Selecting a node shows its visit: attempts, execution_id, payload, output and events.
    await page.locator('g.node[data-node-id="draft"]').click();
    const details = page.getByRole("article", { name: "node draft" });
    await details.getByText(`${runId}:draft:1`).waitFor();
    await details.locator("pre.json", { hasText: '"topic": "durable agents"' }).waitFor();
    await details.locator("pre.json", { hasText: "A draft about durable agents" }).waitFor();
    await details.getByRole("cell", { name: "node.succeeded" }).waitFor();
  });

  it("links a workflow node's child run and the child's parent both ways", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/quick", QUICK);
    await s.api("PUT", "/v1/workflows/outer", {
      id: "outer",
      nodes: [{ node_id: "sub", agent_type: "workflow", payload: { workflow_id: "quick" } }],
    });
    const outer = await s.api<RunBody>("POST", "/v1/runs", { workflow_id: "outer" });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${outer.run_id}`);
    await nodeInState(page, "sub", "SUCCEEDED");
    await page.locator('g.node[data-node-id="sub"]').click();
    const children = page.getByRole("article", { name: "node sub" }).getByRole("list", { name: "child runs" });
    await children.getByText("SUCCEEDED").waitFor();
    await children.getByRole("link").click();
    await nodeInState(page, "only", "SUCCEEDED");
    const childId = runIdOf(s);
    expect(childId).not.toBe(outer.run_id);
    await page.getByRole("link", { name: outer.run_id }).click();
    await nodeInState(page, "sub", "SUCCEEDED");
    expect(runIdOf(s)).toBe(outer.run_id);
  });

  it("lists runs with filters by status and workflow, and shows runs starting and ending live", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    await s.api("PUT", "/v1/workflows/quick", QUICK);
    const quick = await s.api<RunBody>("POST", "/v1/runs", { workflow_id: "quick" });
    await signIn(s);
    const { page } = s;
    const table = page.getByRole("table", { name: "runs" });
    await table.locator(`tr[data-run-id="${quick.run_id}"]`).waitFor();

    await page.getByLabel("Status").selectOption("RUNNING");
    await page.waitForFunction(() => location.hash.includes("status=RUNNING"));
    const started = await s.api<RunBody>("POST", "/v1/runs", { workflow_id: "publish", input: { topic: "live" } });
    const row = table.locator(`tr[data-run-id="${started.run_id}"]`);
    await row.waitFor();
    expect(await row.getAttribute("data-status")).toBe("RUNNING");
    await table.locator(`tr[data-run-id="${quick.run_id}"]`).waitFor({ state: "detached" });

    // Cancelled elsewhere: it leaves the RUNNING list without a reload.
    await s.api("POST", `/v1/runs/${started.run_id}/cancel`, { reason: "test" });
    await row.waitFor({ state: "detached" });

    await page.getByLabel("Status").selectOption("");
    await page.getByLabel("Workflow").selectOption("quick");
    await table.locator(`tr[data-run-id="${quick.run_id}"][data-status="SUCCEEDED"]`).waitFor();
    await table.locator(`tr[data-run-id="${started.run_id}"]`).waitFor({ state: "detached" });
    // Live updates may redraw the list meanwhile: wait for it to settle on the one run.
    await expect.poll(() => table.locator("tbody tr").count()).toBe(1);
  });

  it("cancels and retries a run (from a chosen node), each only after a confirmation", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    const run = await s.api<RunBody>("POST", "/v1/runs", { workflow_id: "publish", input: { topic: "x" } });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}`);
    await nodeInState(page, "draft", "PENDING");

    // Going back from the question changes nothing.
    await page.getByRole("button", { name: "Cancel run…" }).click();
    const cancel = page.getByRole("dialog", { name: "Cancel this run?" });
    await cancel.waitFor();
    await cancel.getByRole("button", { name: "Back" }).click();
    await cancel.waitFor({ state: "detached" });
    expect((await s.api<RunBody>("GET", `/v1/runs/${run.run_id}`)).status).toBe("RUNNING");

    await page.getByRole("button", { name: "Cancel run…" }).click();
    await cancel.getByLabel("Reason (optional)").fill("superseded by a newer draft");
    await cancel.getByRole("button", { name: "Cancel the run" }).click();
    await runStatus(page, "CANCELLED");

    await page.getByRole("button", { name: "Retry run…" }).click();
    const retry = page.getByRole("dialog", { name: "Retry this run?" });
    await retry.getByLabel("From").selectOption("draft");
    await retry.getByRole("button", { name: "Retry the run" }).click();
    await runStatus(page, "RUNNING");
    const events = await s.api<{ events: { type: string; data: Record<string, unknown> }[] }>(
      "GET",
      `/v1/runs/${run.run_id}/events`,
    );
    expect(events.events.find((e) => e.type === "run.cancelled")?.data).toMatchObject({
      error: { reason: "cancelled", message: "superseded by a newer draft" },
    });
    expect(events.events.find((e) => e.type === "run.retried")?.data).toMatchObject({ from: "draft" });

    // The redriven draft is a new visit; completing it moves the run on, live.
    await page.locator('g.node[data-node-id="draft"] .node-state', { hasText: "visit 2" }).waitFor();
    await s.completeWriterTask();
    await nodeInState(page, "draft", "SUCCEEDED");
    await nodeInState(page, "check", "IN_REVIEW");
  });
});
