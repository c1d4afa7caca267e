/**
 * examples/python-agent/agent.py (standard library Python) against the HTTP API on a real port,
 * with the system clock so that leases and long polls run in real time: it drives runs to the
 * end with the route it chose, fails a task for good on NonRetryable, and drops a task when the
 * server answers 409 (its run cancelled mid-task). Waits are on the engine and on log lines.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, onTestFailed } from "vitest";
import type { WorkflowInput } from "../../src/index.js";
import { systemClock } from "../../src/index.js";
import { resettingProxy, testApi } from "./helpers.js";

const AGENT = fileURLToPath(new URL("../../examples/python-agent/agent.py", import.meta.url));
const WORKFLOW = JSON.parse(
  readFileSync(new URL("../../examples/python-agent/workflow.json", import.meta.url), "utf8"),
) as WorkflowInput;
const TOKEN = "agent-python-0123456789abcdef";
const hasPython = spawnSync("python3", ["--version"]).status === 0;

const ROUTINE = "The quarterly report is ready for review by the whole team next week";
const URGENT = "Checkout is down for every customer since the deploy at noon";

/** agent.py as a child process: its log (stderr) so far, waits on log lines, and its exit. */
class PythonAgent {
  readonly proc: ChildProcess;
  log = "";
  readonly exited: Promise<number | null>;
  private readonly waiters = new Set<() => void>();

  constructor(args: string[]) {
    this.proc = spawn("python3", [AGENT, ...args], {
      env: { ...process.env, SKEIN_TOKEN: TOKEN, PYTHONUNBUFFERED: "1" },
      stdio: ["ignore", "inherit", "pipe"],
    });
    children.add(this.proc);
    // A run that never ends fails on the test's timeout: the agent's log says why.
    onTestFailed(() => console.error(`agent.py log:\n${this.log}`));
    this.proc.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      this.log += chunk;
      for (const w of [...this.waiters]) w();
    });
    this.exited = new Promise((resolve) => this.proc.once("close", (code) => resolve(code)));
  }

  /** Resolves once the log matches `pattern`; rejects if the agent exits first. */
  waitFor(pattern: RegExp): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (pattern.test(this.log)) resolve();
        else if (this.proc.exitCode !== null || this.proc.signalCode !== null)
          reject(new Error(`agent exited before logging ${pattern}:\n${this.log}`));
        else return;
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      this.exited.then(check, () => {});
      check();
    });
  }
}

const children = new Set<ChildProcess>();
afterEach(() => {
  for (const child of children) child.kill("SIGKILL");
  children.clear();
});

/** An engine without in-process agents (every node waits for external ones), served on a real port. */
async function serve() {
  const t = await testApi({
    engine: { clock: systemClock, agents: {} },
    server: {
      tokens: [{ token: TOKEN, role: "agent", name: "python", agent_types: ["summarize", "classify", "notify"] }],
    },
  });
  await t.engine.registerWorkflow(WORKFLOW);
  const url = await t.app.listen({ port: 0, host: "127.0.0.1" });
  /** Starts agent.py against the server (or `server`); `--lease-seconds 3` makes it heartbeat every second. */
  const agent = (...args: string[]) => agentOn(url, ...args);
  const agentOn = (server: string, ...args: string[]) =>
    new PythonAgent(["--server", server, "--worker-id", "py-test", "--lease-seconds", "3", ...args]);
  return { ...t, agent, agentOn };
}

describe.skipIf(!hasPython)("examples/python-agent (needs python3 on PATH)", () => {
  it("drives two runs to SUCCEEDED, each down the branch its classify task chose, then exits 0", async () => {
    const { engine, agent } = await serve();
    const routine = await engine.startRun(WORKFLOW.id, { input: { text: ROUTINE } });
    const urgent = await engine.startRun(WORKFLOW.id, { input: { text: URGENT } });
    const py = agent("--agent-types", "summarize,classify,notify", "--max-tasks", "6");

    const nodes = async (runId: string) => {
      const run = await engine.waitForRun(runId);
      expect(run.status, py.log).toBe("SUCCEEDED");
      return Object.fromEntries(run.nodes.map((n) => [n.node_id, [n.state, n.output]]));
    };
    expect(await nodes(routine.run_id)).toEqual({
      summarize: ["SUCCEEDED", { summary: "The quarterly report is ready for review by" }],
      classify: ["SUCCEEDED", { label: "routine" }],
      publish: ["SUCCEEDED", { channel: "#digest", message_id: `${routine.run_id}:publish:1` }],
      escalate: ["SKIPPED", null],
    });
    expect(await nodes(urgent.run_id)).toEqual({
      summarize: ["SUCCEEDED", { summary: "Checkout is down for every customer since the" }],
      classify: ["SUCCEEDED", { label: "urgent" }],
      publish: ["SKIPPED", null],
      escalate: ["SUCCEEDED", { channel: "#on-call", message_id: `${urgent.run_id}:escalate:1` }],
    });
    expect(await py.exited, py.log).toBe(0);
    expect(py.log).toContain("stopped after 6 task(s)");
    // summarize's model call was a durable step, recorded over POST /v1/tasks/{execution_id}/steps.
    const steps = await engine.listSteps(routine.run_id, "summarize");
    expect(steps.map((s) => [s.name, s.attempt, s.output])).toEqual([
      ["model:1", 1, "The quarterly report is ready for review by"],
    ]);
  }, 20_000);

  it("sends a heartbeat and a report cut by a reset connection again at once, once", async () => {
    const { app, engine, agentOn } = await serve();
    const proxy = await resettingProxy(app, { heartbeat: 1, complete: 1 });
    const run = await engine.startRun(WORKFLOW.id, { input: { text: ROUTINE, work_seconds: 2.5 } });
    const py = agentOn(proxy.url, "--agent-types", "summarize", "--max-tasks", "1");
    expect(await py.exited, py.log).toBe(0);
    expect(py.log).toContain(`completed ${run.run_id}:summarize:1`);
    // Neither the heartbeat's warning nor the backoff of a report tried again later.
    expect(py.log).not.toMatch(/heartbeat for|again in/);
    expect([proxy.sent("heartbeat") >= 2, proxy.sent("complete")]).toEqual([true, 2]);
    expect((await engine.getRun(run.run_id)).nodes[0]).toMatchObject({ node_id: "summarize", state: "SUCCEEDED" });
  }, 20_000);

  it("fails a task for good when the handler raises NonRetryable", async () => {
    const { engine, agent } = await serve();
    const run = await engine.startRun(WORKFLOW.id, { input: {} });
    const py = agent("--max-tasks", "1");
    const failed = await engine.waitForRun(run.run_id);
    expect(failed.status).toBe("FAILED");
    expect(failed.nodes[0]).toMatchObject({
      node_id: "summarize",
      state: "FAILED",
      attempt: 1,
      error: { message: "nothing to summarize: give the run's input a text or a topic" },
    });
    expect(await py.exited, py.log).toBe(0);
  }, 20_000);

  it("drops a task whose run is cancelled mid-task (409 on its heartbeat) and goes on with the next", async () => {
    const { engine, agent } = await serve();
    const py = agent("--max-tasks", "3");
    const doomed = await engine.startRun(WORKFLOW.id, { input: { text: ROUTINE, work_seconds: 60 } });
    const task = `${doomed.run_id}:summarize:1`;
    await py.waitFor(new RegExp(`claimed ${task}`));
    await engine.cancelRun(doomed.run_id, { reason: "changed my mind" });
    await py.waitFor(new RegExp(`lost ${task} \\(409 conflict: .*\\): dropping it`));

    const next = await engine.startRun(WORKFLOW.id, { input: { text: ROUTINE } });
    expect((await engine.waitForRun(next.run_id)).status, py.log).toBe("SUCCEEDED");
    expect(await py.exited, py.log).toBe(0);
    expect((await engine.getRun(doomed.run_id)).status).toBe("CANCELLED");
    // Dropped, not reported: the engine saw no report for the cancelled attempt.
    const events = await engine.listEvents(doomed.run_id);
    expect(events.filter((e) => e.type === "result.fenced")).toEqual([]);
    expect(py.log).not.toMatch(new RegExp(`(completed|failed) ${task}`));
  }, 20_000);

  it("on SIGTERM mid-task, finishes and reports the task, then exits 0 without claiming another", async () => {
    const { engine, agent } = await serve();
    const py = agent();
    const run = await engine.startRun(WORKFLOW.id, { input: { text: ROUTINE, work_seconds: 2 } });
    const task = `${run.run_id}:summarize:1`;
    await py.waitFor(new RegExp(`claimed ${task}`));
    py.proc.kill("SIGTERM");
    expect(await py.exited, py.log).toBe(0);
    expect(py.log).toMatch(new RegExp(`SIGTERM: stopping after the current task[^]*completed ${task}`));
    const nodes = (await engine.getRun(run.run_id)).nodes.map((n) => [n.node_id, n.state]);
    expect(nodes.slice(0, 2)).toEqual([
      ["summarize", "SUCCEEDED"],
      ["classify", "PENDING"],
    ]);
  }, 20_000);

  it("on SIGTERM while long-polling, exits 0 at once instead of finishing the poll", async () => {
    const { agent } = await serve();
    const py = agent();
    await py.waitFor(/claiming summarize,classify,notify as py-test/);
    py.proc.kill("SIGTERM");
    expect(await py.exited, py.log).toBe(0);
    expect(py.log).toContain("stopped after 0 task(s)");
  }, 15_000);
});
