/**
 * A map node over HTTP (DESIGN §11.1): GET /v1/runs/{id} shows its counts (with pending) and no
 * item runs among the children; GET /v1/runs/{id}/nodes/{node_id}/items pages through its items,
 * is refused like the run for a token scoped elsewhere, shows an agent's item's attempts, and
 * links to item runs (items that undo) such a token may read.
 */
import { describe, expect, it } from "vitest";
import type { TokenEntry } from "../../src/http/auth.js";
import { MapItemSchema, RunWithNodesSchema } from "../../src/http/schemas.js";
import { bearer, TOKEN_LIST, TOKENS, testApi } from "./helpers.js";

const REFUND_READER = "refund-reader-0123456789abcdef";
const TOKENS_WITH_SCOPE: TokenEntry[] = [
  ...TOKEN_LIST,
  { token: REFUND_READER, role: "reviewer", name: "refunds", workflows: ["refund"] },
];

/**
 * One map node over a fixed list, each item a `writer` (which answers at once): a row holding its
 * attempts, or (`undoes`: the items declare compensation) a run of the item workflow.
 */
const mapWorkflow = (id: string, items: unknown[], undoes = false) => ({
  id,
  nodes: [
    {
      node_id: "answer",
      agent_type: "map",
      payload: {
        items,
        max_concurrency: 3,
        each: {
          agent_type: "writer",
          payload: { q: "{{ item }}" },
          ...(undoes ? { compensation: { agent_type: "writer" } } : {}),
        },
      },
    },
    { node_id: "after", agent_type: "writer", depends_on: ["answer"] },
  ],
});

async function mapRun(id: string, items: unknown[], undoes = false) {
  const t = await testApi({ server: { tokens: TOKENS_WITH_SCOPE } });
  await t.engine.registerWorkflow(mapWorkflow(id, items, undoes));
  const run = await t.engine.startRun(id);
  expect((await t.engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
  const get = (url: string, token: string = TOKENS.admin) => t.app.inject({ url, headers: bearer(token) });
  return { ...t, runId: run.run_id, get };
}

describe("GET /v1/runs/{run_id}/nodes/{node_id}/items", () => {
  it("shows the map's counts on the run, and pages through its items by index", async () => {
    const { runId, get } = await mapRun("fan", ["a", "b", "c", "d", "e", "f", "g"]);
    const run = await get(`/v1/runs/${runId}`);
    expect(run.statusCode).toBe(200);
    const body = RunWithNodesSchema.parse(run.json());
    expect(body.nodes.find((n) => n.node_id === "answer")?.items).toMatchObject({
      total: 7,
      pending: 0,
      running: 0,
      succeeded: 7,
      failed: 0,
      cancelled: 0,
    });
    expect(body.nodes.find((n) => n.node_id === "after")?.items).toBeNull();
    expect(body.children).toEqual([]);

    const first = await get(`/v1/runs/${runId}/nodes/answer/items?limit=3`);
    expect(first.statusCode).toBe(200);
    const page = first.json();
    expect(page.items.map((i: unknown) => MapItemSchema.parse(i).index)).toEqual([0, 1, 2]);
    expect(page.items[1]).toMatchObject({ item: "b", state: "SUCCEEDED", output: { node: "answer" } });
    expect(page.next_after).toBe(2);
    const rest = (await get(`/v1/runs/${runId}/nodes/answer/items?after=2&limit=10&visit=1`)).json();
    expect(rest.items.map((i: { item: string }) => i.item)).toEqual(["d", "e", "f", "g"]);
    expect(rest.next_after).toBeNull();

    // An agent's item holds its attempts: no run of its own.
    expect(page.items[0]).toMatchObject({ agent_type: "writer", attempt: 1, failures: 0, child_run_id: null });
  });

  it("links each item that undoes to its run, a child of the map's visit", async () => {
    const { runId, get } = await mapRun("fan", ["a", "b"], true);
    const page = (await get(`/v1/runs/${runId}/nodes/answer/items`)).json();
    expect(page.items[0]).toMatchObject({ agent_type: null, attempt: 0 });
    const itemRun = (await get(`/v1/runs/${page.items[0].child_run_id}`)).json();
    expect(RunWithNodesSchema.parse(itemRun).parent).toMatchObject({ run_id: runId, node_id: "answer", item: 0 });
  });

  it("refuses a page over 1000 (400), a node that is not a map node and an unknown run (404)", async () => {
    const { runId, get } = await mapRun("fan", [1]);
    const big = await get(`/v1/runs/${runId}/nodes/answer/items?limit=1001`);
    expect(big.statusCode).toBe(400);
    expect(big.json().error.details.problems).toEqual([
      { path: "query.limit", message: expect.stringContaining("1000") },
    ]);
    const notMap = await get(`/v1/runs/${runId}/nodes/after/items`);
    expect(notMap.statusCode).toBe(404);
    expect(notMap.json().error.message).toContain('has no map node "after": its map nodes are answer');
    expect((await get("/v1/runs/no-such-run/nodes/answer/items")).statusCode).toBe(404);
  });

  it("is scoped like the run: 404 for a map of another workflow, and the items' runs readable with their map's", async () => {
    const refund = await mapRun("refund", ["x", "y"], true);
    const own = await refund.get(`/v1/runs/${refund.runId}/nodes/answer/items`, REFUND_READER);
    expect(own.statusCode).toBe(200);
    // An item run's workflow is refund/answer: in scope with refund, which the token names exactly.
    const child = own.json().items[0].child_run_id;
    expect((await refund.get(`/v1/runs/${child}`, REFUND_READER)).statusCode).toBe(200);

    await refund.engine.registerWorkflow(mapWorkflow("payroll", ["p"], true));
    const payroll = await refund.engine.startRun("payroll");
    await refund.engine.waitForRun(payroll.run_id);
    const other = await refund.get(`/v1/runs/${payroll.run_id}/nodes/answer/items`, REFUND_READER);
    expect(other.statusCode).toBe(404);
    expect(other.json().error.message).toBe(`run ${payroll.run_id} does not exist; check the run id and the database`);
    const payrollItem = (await refund.engine.listMapItems(payroll.run_id, "answer")).items[0]?.child_run_id;
    expect((await refund.get(`/v1/runs/${payrollItem}`, REFUND_READER)).statusCode).toBe(404);
  });
});
