import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createServer } from "../../src/http/server.js";
import { createTestEngine, defineAgent, type Task, ValidationError } from "../../src/index.js";
import { onPostgres, testEngine } from "../helpers.js";
import { json, startServer, type TestServer } from "../local-server.js";

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function echoServer(): Promise<TestServer> {
  const s = await startServer((req, res) =>
    json(res, 200, { auth: req.headers.authorization ?? null, body: req.body ? JSON.parse(req.body) : null }),
  );
  cleanup.push(() => s.close());
  return s;
}

/** A page build like Vite's, for GET / as served. */
function pageBuild(): string {
  const dir = mkdtempSync(join(tmpdir(), "skein-ui-"));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, "assets"));
  writeFileSync(join(dir, "index.html"), '<!doctype html><script type="module" src="/assets/index-abc.js"></script>');
  writeFileSync(join(dir, "assets", "index-abc.js"), "console.log('page')");
  return dir;
}

const bearerWorkflow = (url: string) => ({
  id: "call-api",
  nodes: [
    {
      node_id: "call",
      agent_type: "http",
      payload: {
        method: "POST",
        url: `${url}/echo`,
        headers: { Authorization: "Bearer {{ secrets.TOKEN }}" },
        body: { note: "{{ input.note }}" },
      },
    },
  ],
});

describe("secrets", () => {
  it("reach the request and nothing else: not the database, events, logs, getRun, the API or the page", async () => {
    const value = `tok_${randomBytes(12).toString("hex")}`;
    const s = await echoServer();
    const logged: string[] = [];
    const logger = pino({ level: "trace" }, { write: (line: string) => logged.push(line) });
    const { engine, database } = await testEngine({ secrets: { TOKEN: value }, logger });
    await engine.registerWorkflow(bearerWorkflow(s.url));
    // The input holds the placeholder text in a field the template copies: it stays text.
    const started = await engine.startRun("call-api", { input: { note: "[secret TOKEN]" } });
    const run = await engine.waitForRun(started.run_id);
    expect(run.status).toBe("SUCCEEDED");

    expect(s.requests[0]?.headers.authorization).toBe(`Bearer ${value}`);
    expect(JSON.parse(s.requests[0]?.body ?? "null")).toEqual({ note: "[secret TOKEN]" });
    const node = run.nodes[0];
    expect(node?.payload).toMatchObject({ headers: { Authorization: "Bearer [secret TOKEN]" } });
    // The service echoed the header: the output holds the placeholder.
    expect(node?.output).toMatchObject({ body: { auth: "Bearer [secret TOKEN]", body: { note: "[secret TOKEN]" } } });

    const app = await createServer({ engine, ui: pageBuild(), logger });
    cleanup.push(() => app.close());
    const served = [
      await app.inject({ url: "/" }),
      await app.inject({ url: `/v1/runs/${run.run_id}` }),
      await app.inject({ url: `/v1/runs/${run.run_id}/events` }),
      await app.inject({ url: `/v1/workflows/call-api?version=${run.workflow_version}` }),
      await app.inject({ url: "/v1/runs" }),
    ];
    for (const res of served) expect(res.statusCode).toBe(200);
    const seen = {
      events: JSON.stringify(await engine.listEvents(run.run_id)),
      getRun: JSON.stringify(await engine.getRun(run.run_id)),
      api: served.map((r) => r.body).join("\n"),
      logs: logged.join(""),
    };
    for (const [where, text] of Object.entries(seen))
      expect({ where, leaked: text.includes(value) }).toEqual({ where, leaked: false });
    expect(seen.getRun).toContain("Bearer [secret TOKEN]");
    expect(logged.length).toBeGreaterThan(0);
    await engine.close();
    if (!onPostgres) {
      const file = database.slice("sqlite:".length);
      const files = [file, `${file}-wal`, `${file}-shm`].filter((f) => existsSync(f));
      expect(files.length).toBeGreaterThan(0);
      for (const f of files) expect({ f, leaked: readFileSync(f).includes(value) }).toEqual({ f, leaked: false });
    }
  });

  it("a payload naming a secret the engine lacks fails its visit template_error, saying how to set it", async () => {
    const s = await echoServer();
    const { engine } = await testEngine({ secrets: { OTHER: "other-value-1" } });
    await engine.registerWorkflow(bearerWorkflow(s.url));
    const run = await engine.waitForRun((await engine.startRun("call-api", { input: { note: "n" } })).run_id);
    expect(run.status).toBe("FAILED");
    expect(run.nodes[0]).toMatchObject({ state: "FAILED", reason: "template_error" });
    expect(run.nodes[0]?.error?.message).toBe(
      "secret TOKEN is not configured: set SKEIN_SECRET_TOKEN or the secrets option",
    );
    expect(s.requests).toHaveLength(0);
  });

  it("go to an agent of yours only when it declares them (defineAgent({ secrets })), and its output is redacted", async () => {
    const value = `key_${randomBytes(8).toString("hex")}`;
    const { engine } = await testEngine({
      secrets: { API_KEY: value },
      agents: {
        declared: defineAgent({ secrets: ["API_KEY"] }, (t) => {
          const { key } = t.payload as { key: string };
          return { got: key === `k=${value}`, echoed: key };
        }),
        undeclared: (t: Task) => ({ payload: t.payload }),
      },
    });
    const workflow = (agent: string) => ({
      id: agent,
      nodes: [{ node_id: "use", agent_type: agent, retry_count: 2, payload: { key: "k={{ secrets.API_KEY }}" } }],
    });
    await engine.registerWorkflow(workflow("declared"));
    await engine.registerWorkflow(workflow("undeclared"));
    const ok = await engine.waitForRun((await engine.startRun("declared")).run_id);
    expect(ok.nodes[0]?.output).toEqual({ got: true, echoed: "k=[secret API_KEY]" });
    const refused = await engine.waitForRun((await engine.startRun("undeclared")).run_id);
    expect(refused.nodes[0]).toMatchObject({ state: "FAILED", reason: "non_retryable", attempt: 1 });
    expect(refused.nodes[0]?.error?.message).toBe(
      'node use reads secrets.API_KEY in its payload, but agent "undeclared" does not declare it: define it with defineAgent({ secrets: ["API_KEY"] }, handler)',
    );
  });

  it("reach a declared agent in createTestEngine too (its recording wrapper keeps the declaration)", async () => {
    const t = await createTestEngine({
      secrets: { K: "value-12345" },
      agents: {
        declared: defineAgent({ secrets: ["K"] }, (task) => ({
          ok: (task.payload as { k: string }).k === "value-12345",
        })),
      },
      workflows: [{ id: "w", nodes: [{ node_id: "n", agent_type: "declared", payload: { k: "{{ secrets.K }}" } }] }],
    });
    cleanup.push(() => t.close());
    const run = await t.engine.startRun("w");
    await t.runUntilIdle();
    expect((await t.engine.getRun(run.run_id)).nodes[0]).toMatchObject({ state: "SUCCEEDED", output: { ok: true } });
  });

  it("are refused at validation anywhere but agents' payloads, and only by name", async () => {
    const { engine } = await testEngine({ secrets: { TOKEN: "token-value-1" }, agents: { a: () => null } });
    const problems = async (nodes: unknown[]) => {
      const workflow = { id: "bad", nodes } as Parameters<typeof engine.registerWorkflow>[0];
      const e = await engine.registerWorkflow(workflow).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(ValidationError);
      return (e as ValidationError).problems.map((p) => `${p.path}: ${p.message}`);
    };
    expect(
      await problems([
        { node_id: "x", agent_type: "a", next_on_success: [{ when: "secrets.TOKEN = 'a'", to: "y" }, { to: "y" }] },
        { node_id: "y", agent_type: "a" },
      ]),
    ).toEqual([
      `nodes[0].next_on_success[0].when: "secrets.TOKEN = 'a'" reads secrets.TOKEN: secrets may be read only in a node's payload (an http or llm node's, or an agent's that declares them with defineAgent({ secrets }))`,
    ]);
    expect(
      await problems([{ node_id: "s", agent_type: "sleep", payload: { seconds: "{{ $length(secrets.TOKEN) }}" } }]),
    ).toEqual([
      `nodes[0].payload.seconds: "$length(secrets.TOKEN)" reads secrets.TOKEN: a sleep node's payload cannot hold secrets: they go only to agents (http, llm, or an agent that declares them)`,
    ]);
    expect(await problems([{ node_id: "x", agent_type: "a", payload: { all: "{{ $string(secrets) }}" } }])).toEqual([
      `nodes[0].payload.all: "$string(secrets)" reads secrets without naming one: write secrets.NAME (the engine must know which secrets go where)`,
    ]);
    expect(
      await problems([
        { node_id: "x", agent_type: "a", compensation: { agent_type: "a", payload: { k: "{{ secrets.TOKEN }}" } } },
      ]),
    ).toEqual([
      `nodes[0].compensation.payload.k: "secrets.TOKEN" reads secrets.TOKEN: secrets may be read only in a node's payload (an http or llm node's, or an agent's that declares them with defineAgent({ secrets }))`,
    ]);
  });

  it("the secrets option refuses bad names and empty values", async () => {
    await expect(testEngine({ secrets: { "bad-name": "x" } })).rejects.toThrow(
      /secrets\.bad-name: a secret's name is letters/,
    );
    await expect(testEngine({ secrets: { EMPTY: "" } })).rejects.toThrow(/secrets\.EMPTY: must be a non-empty string/);
  });
});
