/**
 * `skein mcp`: the built CLI as an MCP server on stdio, driven by the SDK's own Client, over a
 * SQLite file that an engine in this process serves (its runs finished, failed, waiting for a
 * review or an event), and once over `skein serve`'s HTTP API. Each tool is called and its
 * effect read back; writes are refused without --allow-writes. Waits are on the runs' state.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterEach, describe, expect, it } from "vitest";
import { createEngine, type Engine, NonRetryableError, type RunEvent } from "../../src/index.js";
import { TOKEN_LIST, TOKENS } from "../http/helpers.js";
import { AGENTS, CLI, commandsMs, requireBuiltCli, Skein, until, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

const READ_TOOLS = ["get_events", "get_run", "list_reviews", "list_runs", "list_workflows"];
const WRITE_TOOLS = ["cancel_run", "decide_review", "retry_run", "send_event", "start_run"];

const clients: Client[] = [];
const engines: Engine[] = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(engines.splice(0).map((e) => e.close({ timeoutMs: 100 })));
});

/** A `skein mcp` process with these arguments, connected. */
async function mcp(args: string[], cwd: string, env: Record<string, string> = {}): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "mcp", ...args],
    cwd,
    env: { PATH: process.env.PATH ?? "", NO_COLOR: "1", ...env },
    stderr: "pipe",
  });
  const client = new Client({ name: "skein-test", version: "1.0.0" });
  await client.connect(transport);
  clients.push(client);
  return client;
}

interface CallAnswer {
  isError: boolean;
  text: string;
  json: Record<string, unknown>;
}

/** `tools/call`: its first text block, parsed when it is JSON. */
async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallAnswer> {
  const r = (await client.callTool({ name, arguments: args })) as {
    isError?: boolean;
    content: { type: string; text: string }[];
    structuredContent?: Record<string, unknown>;
  };
  const text = r.content[0]?.text ?? "";
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  if (!r.isError) expect(r.structuredContent).toEqual(json);
  return { isError: r.isError === true, text, json };
}

/** The answer of a tool call that succeeded. */
async function ok<T = Record<string, unknown>>(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<T> {
  const r = await call(client, name, args);
  expect(r.isError, r.text).toBe(false);
  return r.json as T;
}

interface RunJson {
  run_id: string;
  workflow_id: string;
  status: string;
  error: { message: string } | null;
  nodes: { node_id: string; visit: number; state: string; output: unknown }[];
}

/** The run once get_run shows `check` true of it. */
function runWhen(client: Client, runId: string, what: string, check: (run: RunJson) => boolean): Promise<RunJson> {
  return until(
    `run ${runId} ${what}`,
    async () => (await ok<{ run: RunJson }>(client, "get_run", { run_id: runId })).run,
    check,
  );
}

/**
 * A SQLite file served by an engine here: runs of `echo` (SUCCEEDED), `failing` (FAILED: its
 * agent fails until `fixed`), `approval` (waiting in its review), `pay` (waiting for the event
 * `paid`) and `parked` (waiting for an event nobody sends).
 */
async function prepared() {
  const ws = workspace();
  let fixed = false;
  const engine = await createEngine({
    database: ws.db,
    agents: {
      echo: (task) => ({ node: task.node_id, input: task.input }),
      fragile: () => {
        if (!fixed) throw new NonRetryableError("the upstream API said no");
        return { fixed: true };
      },
    },
  });
  engines.push(engine);
  await engine.registerWorkflow({ id: "echo", nodes: [{ node_id: "a", agent_type: "echo" }] });
  await engine.registerWorkflow({
    id: "failing",
    nodes: [
      { node_id: "a", agent_type: "echo" },
      { node_id: "b", agent_type: "fragile", depends_on: ["a"] },
    ],
  });
  await engine.registerWorkflow({
    id: "approval",
    nodes: [
      { node_id: "a", agent_type: "echo" },
      {
        node_id: "approve",
        agent_type: "human_review",
        depends_on: ["a"],
        payload: { title: "Ship it?", instructions: "Approve to ship." },
      },
      { node_id: "ship", agent_type: "echo", depends_on: ["approve"] },
    ],
  });
  await engine.registerWorkflow({
    id: "pay",
    nodes: [{ node_id: "paid", agent_type: "wait_event", payload: { event: "paid" } }],
  });
  await engine.registerWorkflow({
    id: "parked",
    nodes: [{ node_id: "wait", agent_type: "wait_event", payload: { event: "never" } }],
  });

  const echo = await engine.startRun("echo", { input: { topic: "durable agents" } });
  const failing = await engine.startRun("failing", { input: { topic: "billing" } });
  const approval = await engine.startRun("approval");
  const pay = await engine.startRun("pay");
  const parked = await engine.startRun("parked");
  await Promise.all([
    engine.waitForRun(echo.run_id),
    engine.waitForRun(failing.run_id),
    reached(engine, approval.run_id, "review.requested"),
    reached(engine, pay.run_id, "node.waiting"),
    reached(engine, parked.run_id, "node.waiting"),
  ]);
  return {
    ws,
    engine,
    fix: () => {
      fixed = true;
    },
    runs: {
      echo: echo.run_id,
      failing: failing.run_id,
      approval: approval.run_id,
      pay: pay.run_id,
      parked: parked.run_id,
    },
  };
}

/** Once the run has an event of this type: its history replayed (from 0), then live. */
function reached(engine: Engine, runId: string, type: RunEvent["type"]): Promise<void> {
  return new Promise((resolve) => {
    const off = engine.subscribe(
      (e) => {
        if (e.type !== type) return;
        off();
        resolve();
      },
      { run_id: runId, from: 0 },
    );
  });
}

describe("skein mcp over the database", () => {
  it(
    "serves the read tools only without --allow-writes, refuses the writes, and answers bad arguments and unknown runs as tool errors",
    async () => {
      const { ws, runs } = await prepared();
      const client = await mcp(["--db", ws.db], ws.dir);

      const listed = await client.listTools();
      expect(listed.tools.map((t) => t.name).sort()).toEqual(READ_TOOLS);
      for (const t of listed.tools) {
        expect(t.description).toMatch(/^[A-Z].{20,}/);
        expect(t.annotations?.readOnlyHint).toBe(true);
      }
      expect(client.getInstructions()).toMatch(/--allow-writes/);

      // list_workflows, list_runs with each filter and a cursor.
      const { workflows } = await ok<{ workflows: { id: string }[] }>(client, "list_workflows");
      expect(workflows.map((w) => w.id).sort()).toEqual(["approval", "echo", "failing", "parked", "pay"]);
      const all = await ok<{ runs: RunJson[]; next_cursor: string | null }>(client, "list_runs");
      expect(all.runs.map((r) => r.run_id).sort()).toEqual(Object.values(runs).sort());
      const failed = await ok<{ runs: RunJson[] }>(client, "list_runs", { status: "FAILED" });
      expect(failed.runs.map((r) => r.run_id)).toEqual([runs.failing]);
      const found = await ok<{ runs: RunJson[] }>(client, "list_runs", { query: "DURABLE agents" });
      expect(found.runs.map((r) => r.run_id)).toEqual([runs.echo]);
      const ofWorkflow = await ok<{ runs: RunJson[] }>(client, "list_runs", { workflow_id: "approval" });
      expect(ofWorkflow.runs.map((r) => r.run_id)).toEqual([runs.approval]);
      const first = await ok<{ runs: RunJson[]; next_cursor: string }>(client, "list_runs", { limit: 3 });
      expect(first.runs).toHaveLength(3);
      const rest = await ok<{ runs: RunJson[]; next_cursor: string | null }>(client, "list_runs", {
        limit: 3,
        cursor: first.next_cursor,
      });
      expect(rest.next_cursor).toBeNull();
      expect([...first.runs, ...rest.runs].map((r) => r.run_id)).toEqual(all.runs.map((r) => r.run_id));

      // get_run: the failed node's error and the graph; get_events a page at a time.
      const got = await call(client, "get_run", { run_id: runs.failing });
      expect(got.json).toMatchObject({
        run: { run_id: runs.failing, status: "FAILED" },
        failed_nodes: [{ node_id: "b", visit: 1, error: { message: "the upstream API said no" } }],
      });
      expect(got.json.graph).toMatch(/^flowchart/);
      const { events, next_after_seq } = await ok<{ events: RunEvent[]; next_after_seq: number }>(
        client,
        "get_events",
        { run_id: runs.failing, limit: 2 },
      );
      expect(events.map((e) => e.type)).toEqual(["run.started", expect.any(String)]);
      const later = await ok<{ events: RunEvent[] }>(client, "get_events", {
        run_id: runs.failing,
        after_seq: next_after_seq,
        limit: 1000,
      });
      expect(later.events.at(-1)?.type).toBe("run.failed");

      // list_reviews: the approval run's review.
      const { reviews } = await ok<{ reviews: { run_id: string; node_id: string; title: string }[] }>(
        client,
        "list_reviews",
      );
      expect(reviews).toMatchObject([{ run_id: runs.approval, node_id: "approve", title: "Ship it?" }]);

      // Writes are refused, and nothing changed.
      for (const name of WRITE_TOOLS) {
        const refused = await call(client, name, { run_id: runs.parked, workflow_id: "echo" });
        expect(refused.isError, name).toBe(true);
        expect(refused.text).toMatch(new RegExp(`Tool ${name} not found`));
      }
      expect((await ok<{ runs: RunJson[] }>(client, "list_runs")).runs).toHaveLength(5);
      expect((await ok<{ run: RunJson }>(client, "get_run", { run_id: runs.parked })).run.status).toBe("RUNNING");

      // A bad argument, and the engine's own refusal, are tool errors; the server goes on.
      const bad = await call(client, "get_run", { run_id: 42 });
      expect(bad).toMatchObject({ isError: true, text: expect.stringMatching(/expected string.*run_id/) });
      const typo = await call(client, "list_runs", { stauts: "FAILED" });
      expect(typo).toMatchObject({ isError: true, text: expect.stringMatching(/stauts/) });
      const short = await call(client, "list_runs", { query: "ab" });
      expect(short).toMatchObject({ isError: true, text: expect.stringMatching(/>=3 characters at query/) });
      const unknown = await call(client, "get_run", { run_id: "01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f" });
      expect(unknown).toMatchObject({
        isError: true,
        text: expect.stringMatching(/run 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f does not exist/),
      });
      expect((await ok<{ runs: RunJson[] }>(client, "list_runs", { limit: 1 })).runs).toHaveLength(1);
    },
    commandsMs(2),
  );

  it(
    "with --allow-writes serves every tool, each acting on the runs: start, decide, send, cancel, retry",
    async () => {
      const { ws, runs, fix } = await prepared();
      const client = await mcp(["--db", ws.db, "--allow-writes"], ws.dir);
      const listed = await client.listTools();
      expect(listed.tools.map((t) => t.name).sort()).toEqual([...READ_TOOLS, ...WRITE_TOOLS].sort());
      expect(listed.tools.find((t) => t.name === "cancel_run")?.annotations).toMatchObject({
        readOnlyHint: false,
        destructiveHint: true,
      });

      // start_run: the engine here runs it to its end.
      const started = await ok<RunJson>(client, "start_run", { workflow_id: "echo", input: { topic: "mcp" } });
      expect(started).toMatchObject({ workflow_id: "echo", status: "RUNNING" });
      const done = await runWhen(client, started.run_id, "SUCCEEDED", (r) => r.status === "SUCCEEDED");
      expect(done.nodes[0]?.output).toEqual({ node: "a", input: { topic: "mcp" } });
      const badInput = await call(client, "start_run", { workflow_id: "nope" });
      expect(badInput).toMatchObject({ isError: true, text: expect.stringMatching(/nope/) });

      // decide_review: approved, the run goes on to its end; a second decision is refused.
      const decided = await ok(client, "decide_review", {
        run_id: runs.approval,
        node_id: "approve",
        decision: "approve",
        by: "claude",
        comment: "looks right",
      });
      expect(decided).toMatchObject({ node_id: "approve", state: "SUCCEEDED" });
      await runWhen(client, runs.approval, "SUCCEEDED", (r) => r.status === "SUCCEEDED");
      const again = await call(client, "decide_review", {
        run_id: runs.approval,
        node_id: "approve",
        decision: "reject",
      });
      expect(again.isError).toBe(true);
      expect(again.text).toMatch(/approve/);
      expect((await ok<{ reviews: unknown[] }>(client, "list_reviews", { run_id: runs.approval })).reviews).toEqual([]);

      // send_event: delivered to the waiting node, whose output it becomes.
      const sent = await ok(client, "send_event", { run_id: runs.pay, name: "paid", payload: { amount: 12 } });
      expect(sent).toMatchObject({ delivered_to: { node_id: "paid", visit: 1 }, duplicate: false });
      const paid = await runWhen(client, runs.pay, "SUCCEEDED", (r) => r.status === "SUCCEEDED");
      expect(paid.nodes[0]?.output).toEqual({ amount: 12 });

      // cancel_run: the parked run is cancelled; cancelling it again is a conflict.
      const cancelled = await ok<RunJson>(client, "cancel_run", { run_id: runs.parked, reason: "not needed" });
      expect(cancelled.status).toBe("CANCELLED");
      const twice = await call(client, "cancel_run", { run_id: runs.parked });
      expect(twice).toMatchObject({ isError: true, text: expect.stringMatching(/ended/) });

      // retry_run: the failed run, its agent fixed, runs b again and succeeds.
      fix();
      const retried = await ok<RunJson>(client, "retry_run", { run_id: runs.failing });
      expect(retried.status).toBe("RUNNING");
      const redriven = await runWhen(client, runs.failing, "SUCCEEDED", (r) => r.status === "SUCCEEDED");
      expect(redriven.nodes.find((n) => n.node_id === "b")).toMatchObject({ visit: 2, state: "SUCCEEDED" });
      const notFailed = await call(client, "retry_run", { run_id: runs.echo });
      expect(notFailed).toMatchObject({ isError: true, text: expect.stringMatching(/FAILED or CANCELLED/) });
    },
    commandsMs(3),
  );
});

describe("skein mcp over skein serve's HTTP API", () => {
  it(
    "lists and reads runs and starts one with a token (SKEIN_TOKEN); without a token it answers the API's refusal",
    async () => {
      const ws = workspace();
      const setup = await createEngine({ database: ws.db });
      await setup.registerWorkflow(WORKFLOWS.small);
      await setup.registerWorkflow(WORKFLOWS.failing);
      await setup.close();
      const server = new Skein(["serve", "--port", "0", "--agents", AGENTS, "--db", ws.db], ws.dir, {
        SKEIN_TOKENS: JSON.stringify(TOKEN_LIST),
      });
      const [, url] = await server.waitFor(/serving the HTTP API on (http:\/\/\S+)\/v1/, undefined, "stderr");
      const client = await mcp(["--url", url as string, "--allow-writes"], ws.dir, { SKEIN_TOKEN: TOKENS.admin });

      const failing = await ok<RunJson>(client, "start_run", { workflow_id: "failing", input: { topic: "over http" } });
      const failed = await runWhen(client, failing.run_id, "FAILED", (r) => r.status === "FAILED");
      expect(failed.error?.message).toMatch(/the upstream API said no/);
      const got = await ok<{ failed_nodes: { node_id: string }[]; graph: string }>(client, "get_run", {
        run_id: failing.run_id,
      });
      expect(got.failed_nodes.map((n) => n.node_id)).toEqual(["b"]);
      expect(got.graph).toMatch(/^flowchart/);
      const listed = await ok<{ runs: RunJson[] }>(client, "list_runs", { query: "over http" });
      expect(listed.runs.map((r) => r.run_id)).toEqual([failing.run_id]);
      const events = await ok<{ events: RunEvent[] }>(client, "get_events", { run_id: failing.run_id });
      expect(events.events.at(-1)?.type).toBe("run.failed");
      const conflict = await call(client, "cancel_run", { run_id: failing.run_id });
      expect(conflict).toMatchObject({ isError: true, text: expect.stringMatching(/ended/) });

      const anonymous = await mcp(["--url", url as string], ws.dir);
      const refused = await call(anonymous, "list_runs");
      expect(refused).toMatchObject({ isError: true, text: expect.stringMatching(/SKEIN_TOKEN/) });
      server.proc.kill("SIGTERM");
      expect((await server.result()).code).toBe(0);
    },
    commandsMs(3),
  );
});
