/**
 * maxRunsPerTree (DESIGN §13.1): a root run's tree (the root, its child runs and map item runs,
 * at any depth) holds at most that many runs; a `workflow` node or a map whose start would pass
 * it fails its visit `tree_limit`. On both stores: the count is a row of run_trees (migration 015).
 */
import Database from "better-sqlite3";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { type Engine, type Task, ValidationError } from "../../src/index.js";
import { onPostgres, PG_URL, testEngine } from "../helpers.js";

const leaf = (t: Task) => ({ leaf: t.run_id });

/** Runs a statement on the engine's database from another connection (a count the test sets up). */
async function sql(database: string, text: string, values: unknown[]): Promise<void> {
  if (!onPostgres) {
    const db = new Database(database.replace(/^sqlite:/, ""));
    try {
      db.prepare(text.replace(/\$\d/g, "?")).run(...values);
    } finally {
      db.close();
    }
    return;
  }
  const schema = new URL(database).searchParams.get("schema") as string;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(`SET search_path TO ${schema}`);
    await client.query(text, values);
  } finally {
    await client.end();
  }
}

async function treeSize(engine: Engine, rootRunId: string): Promise<number> {
  let n = 0;
  const seen = [rootRunId];
  while (seen.length > 0) {
    const run = await engine.getRun(seen.pop() as string);
    n += 1;
    seen.push(...run.children.map((c) => c.run_id));
  }
  return n;
}

describe("maxRunsPerTree", () => {
  it("a workflow that calls itself stops at the limit: the start past it fails tree_limit, not retried", async () => {
    const { engine } = await testEngine({ maxRunsPerTree: 4 });
    await engine.registerWorkflow({
      id: "forever",
      nodes: [{ node_id: "again", agent_type: "workflow", retry_count: 2, payload: { workflow_id: "forever" } }],
    });
    const run = await engine.startRun("forever");
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(await treeSize(engine, run.run_id)).toBe(4);
    let deepest = done;
    while (deepest.children.length > 0) deepest = await engine.getRun(deepest.children[0]?.run_id ?? "");
    expect(deepest.parent?.depth).toBe(3);
    expect(deepest.nodes[0]).toMatchObject({ state: "FAILED", reason: "tree_limit", attempt: 1 });
    expect(deepest.nodes[0]?.error?.message).toBe(
      `the tree of root run ${run.run_id} may hold at most 4 runs (engine option maxRunsPerTree), and starting 1 more ` +
        "would pass it: raise maxRunsPerTree, or start fewer child runs (does a workflow start itself?)",
    );
    // Every parent above failed child_failed without a retry: each retry would pass the limit again.
    expect(done.nodes[0]).toMatchObject({ reason: "non_retryable", attempt: 1, error: { reason: "child_failed" } });
  });

  it("a map whose item runs would pass the limit fails tree_limit and starts none", async () => {
    const { engine } = await testEngine({ agents: { leaf }, maxRunsPerTree: 5 });
    await engine.registerWorkflow({ id: "leaf-flow", nodes: [{ node_id: "l", agent_type: "leaf" }] });
    await engine.registerWorkflow({
      id: "fan",
      nodes: [
        {
          node_id: "m",
          agent_type: "map",
          payload: { items: "{{ input.items }}", each: { workflow_id: "leaf-flow", input: {} } },
        },
      ],
    });
    // An agent's items are rows holding their attempts, not runs: they count toward no tree.
    await engine.registerWorkflow({
      id: "fan-rows",
      nodes: [
        { node_id: "m", agent_type: "map", payload: { items: "{{ input.items }}", each: { agent_type: "leaf" } } },
      ],
    });
    const rows = await engine.startRun("fan-rows", { input: { items: [1, 2, 3, 4, 5, 6, 7, 8] } });
    expect((await engine.waitForRun(rows.run_id)).status).toBe("SUCCEEDED");
    const run = await engine.startRun("fan", { input: { items: [1, 2, 3, 4, 5] } });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(done.nodes[0]).toMatchObject({ reason: "tree_limit", error: { details: { max_runs_per_tree: 5 } } });
    expect((await engine.listMapItems(run.run_id, "m")).items.every((i) => i.state === "PENDING")).toBe(true);
    // Four items fit (the root is the fifth run).
    const fits = await engine.startRun("fan", { input: { items: [1, 2, 3, 4] } });
    expect((await engine.waitForRun(fits.run_id)).status).toBe("SUCCEEDED");
  });

  it("is 100,000 by default, counted in the database: a tree at 99,999 starts one more run, not two", async () => {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    let started!: () => void;
    const gateStarted = new Promise<void>((resolve) => {
      started = resolve;
    });
    const gate = async () => {
      started();
      await opened;
      return {};
    };
    const { engine, database } = await testEngine({ agents: { gate, leaf } });
    await engine.registerWorkflow({ id: "one", nodes: [{ node_id: "l", agent_type: "leaf" }] });
    await engine.registerWorkflow({
      id: "two",
      nodes: [
        { node_id: "g", agent_type: "gate", next_on_success: "c1" },
        { node_id: "c1", agent_type: "workflow", payload: { workflow_id: "one" }, next_on_success: "c2" },
        { node_id: "c2", agent_type: "workflow", payload: { workflow_id: "one" } },
      ],
    });
    const run = await engine.startRun("two");
    await gateStarted;
    await sql(database, "INSERT INTO run_trees (root_run_id, runs) VALUES ($1, $2)", [run.run_id, 99_999]);
    open();
    const done = await engine.waitForRun(run.run_id);
    expect(done.nodes.map((n) => [n.node_id, n.state, n.reason ?? null])).toEqual([
      ["g", "SUCCEEDED", null],
      ["c1", "SUCCEEDED", null],
      ["c2", "FAILED", "tree_limit"],
    ]);
    expect(done.nodes[2]?.error?.message).toContain("at most 100000 runs");
  });

  it("refuses a maxRunsPerTree that is not a whole number >= 1", async () => {
    await expect(testEngine({ maxRunsPerTree: 0 })).rejects.toThrow(ValidationError);
    await expect(testEngine({ maxRunsPerTree: 1.5 })).rejects.toThrow(
      "maxRunsPerTree must be a whole number of runs >= 1 (a tree holds its root); got 1.5",
    );
  });
});
