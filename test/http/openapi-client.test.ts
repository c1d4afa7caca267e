/**
 * The OpenAPI document as a client generator sees it: fetched from a listening server, linted
 * with Redocly's recommended rules, turned into TypeScript types by openapi-typescript, and
 * used through openapi-fetch for one full external-agent cycle (register a workflow, start a
 * run, claim its task, heartbeat, complete, read the run SUCCEEDED). The client code is written
 * beside the generated types and type-checked by tsc before the same module runs, so a
 * document whose types do not fit the API fails here.
 */
import { execFile } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createConfig, lintFromString } from "@redocly/openapi-core";
import openapiTS, { astToString } from "openapi-typescript";
import { afterAll, describe, expect, it } from "vitest";
import { fetchApi } from "../helpers.js";
import { bearer, TOKENS, testApi } from "./helpers.js";

const AGENT_TOKEN = "agent-generated-client-0123";

/** Inside the project (so the client's imports resolve to node_modules), ignored by git. */
const dir = join(import.meta.dirname, "../../.tmp", `openapi-client-${process.pid}-${Date.now()}`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The client a user writes against the generated types: the same module is type-checked and run. */
const CLIENT = `
import createClient from "openapi-fetch";
import type { components, paths } from "./skein-api.js";

type Run = components["schemas"]["Run"];
type Task = components["schemas"]["Task"];

export interface Cycle {
  started: Run;
  task: Task;
  heartbeat: components["schemas"]["Error"] | { status: "accepted" | "duplicate"; lease_expires_at: number | null };
  finished: components["schemas"]["RunWithNodes"];
}

function fail(what: string, error: components["schemas"]["Error"] | undefined, status: number): never {
  throw new Error(\`\${what}: \${status} \${error?.error.code}: \${error?.error.message}\`);
}

export async function externalAgentCycle(baseUrl: string, adminToken: string, agentToken: string): Promise<Cycle> {
  const admin = createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${adminToken}\` } });
  const agent = createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${agentToken}\` } });

  const registered = await admin.PUT("/v1/workflows/{id}", {
    params: { path: { id: "generated_client" } },
    body: { id: "generated_client", nodes: [{ node_id: "draft", agent_type: "ext_writer", timeout: 600 }] },
  });
  if (!registered.data) fail("registerWorkflow", registered.error, registered.response.status);

  const started = await admin.POST("/v1/runs", { body: { workflow_id: "generated_client", input: { topic: "openapi" } } });
  if (!started.data) fail("startRun", started.error, started.response.status);

  const claimed = await agent.POST("/v1/tasks/claim", {
    body: { agent_types: ["ext_writer"], worker_id: "generated-client", lease_seconds: 30 },
  });
  if (!claimed.data) fail("claimTasks", claimed.error, claimed.response.status);
  const task = claimed.data.tasks[0];
  if (!task) throw new Error("claimTasks: no task");
  const path = { execution_id: task.execution_id };

  const beat = await agent.POST("/v1/tasks/{execution_id}/heartbeat", {
    params: { path },
    body: { attempt: task.attempt, worker_id: "generated-client", lease_seconds: 60 },
  });
  if (!beat.data) fail("heartbeatTask", beat.error, beat.response.status);

  const completed = await agent.POST("/v1/tasks/{execution_id}/complete", {
    params: { path },
    body: { attempt: task.attempt, worker_id: "generated-client", output: { text: "written by a generated client" } },
  });
  if (!completed.data) fail("completeTask", completed.error, completed.response.status);

  const read = await admin.GET("/v1/runs/{run_id}", { params: { path: { run_id: started.data.run_id } } });
  if (!read.data) fail("getRun", read.error, read.response.status);
  return { started: started.data, task, heartbeat: beat.data, finished: read.data };
}

// The models are typed, not \`any\`: each line below must be refused by tsc.
// @ts-expect-error a run's status is one of the run statuses
export const badStatus: Run["status"] = "DONE";
// @ts-expect-error a claim names its worker
export const badClaim: paths["/v1/tasks/claim"]["post"]["requestBody"]["content"]["application/json"] = { agent_types: ["x"] };
`;

/** The generated module's exported function, as the test imports it after tsc accepted it. */
type ClientModule = {
  externalAgentCycle(
    baseUrl: string,
    adminToken: string,
    agentToken: string,
  ): Promise<{
    started: { run_id: string; status: string };
    task: { run_id: string; node_id: string; attempt: number; input: unknown };
    heartbeat: { status: string };
    finished: { run_id: string; status: string; nodes: { node_id: string; state: string; output: unknown }[] };
  }>;
};

describe("a client generated from GET /v1/openapi.json", () => {
  it("lints clean, type-checks, and drives a full external-agent cycle", async () => {
    const { app, engine } = await testApi({
      server: {
        tokens: [
          { token: TOKENS.admin, role: "admin", name: "ops" },
          { token: AGENT_TOKEN, role: "agent", name: "generated", agent_types: ["ext_writer"] },
        ],
      },
    });
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const res = await fetchApi(`${base}/v1/openapi.json`);
    expect(res.status).toBe(200);
    const text = await res.text();
    const document = JSON.parse(text) as Record<string, unknown>;

    // A standard linter's recommended rules find no error (warnings are listed if any fails).
    const problems = await lintFromString({
      source: text,
      absoluteRef: `${base}/v1/openapi.json`,
      config: await createConfig({ extends: ["recommended"] }),
    });
    const errors = problems.filter((p) => p.severity === "error");
    expect(errors.map((p) => `${p.ruleId}: ${p.message} at ${p.location.map((l) => l.pointer).join(", ")}`)).toEqual(
      [],
    );

    mkdirSync(dir, { recursive: true });
    // defaultNonNullable off: a field with a default (the workflow format's depends_on, payload,
    // ...) is optional to write; openapi-typescript would otherwise require it in components.
    const types = astToString(await openapiTS(text, { defaultNonNullable: false }));
    // Named models and methods, not anonymous inline shapes.
    for (const name of ["Run", "RunWithNodes", "Visit", "RunEvent", "Review", "Task", "Error", "WorkflowDefinition"]) {
      expect(types).toContain(`        ${name}: {`);
    }
    expect(types).toContain("    claimTasks: {");
    writeFileSync(join(dir, "skein-api.d.ts"), types);
    writeFileSync(join(dir, "client.ts"), CLIENT);
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({ extends: "../../tsconfig.json", compilerOptions: { noEmit: true }, include: ["*.ts"] }),
    );
    // Not spawnSync: the server answers from this process, and a loop blocked for tsc's seconds froze
    // its kept-alive connection's timers with the client's (which ran out first was then a race).
    const tsc = await new Promise<{ output: string; code: number | null }>((resolve) => {
      const child = execFile(
        process.execPath,
        ["node_modules/typescript/bin/tsc", "-p", join(dir, "tsconfig.json")],
        { cwd: join(import.meta.dirname, "../..") },
        (_error, stdout, stderr) => resolve({ output: `${stdout}${stderr}`, code: child.exitCode }),
      );
    });
    expect(tsc.output).toBe("");
    expect(tsc.code).toBe(0);

    const client = (await import(join(dir, "client.ts"))) as ClientModule;
    const cycle = await client.externalAgentCycle(base, TOKENS.admin, AGENT_TOKEN);
    expect(cycle.started.status).toBe("RUNNING");
    expect(cycle.task).toMatchObject({ run_id: cycle.started.run_id, node_id: "draft", attempt: 1 });
    expect(cycle.task.input).toEqual({ topic: "openapi" });
    expect(cycle.heartbeat.status).toBe("accepted");
    expect(cycle.finished.status).toBe("SUCCEEDED");
    expect(cycle.finished.nodes).toMatchObject([
      { node_id: "draft", state: "SUCCEEDED", output: { text: "written by a generated client" } },
    ]);
    expect((await engine.getRun(cycle.started.run_id)).status).toBe("SUCCEEDED");
    // The same document, through the in-process route the other tests use.
    expect((await app.inject({ url: "/v1/openapi.json", headers: bearer(TOKENS.admin) })).json()).toEqual(document);
  });
});
