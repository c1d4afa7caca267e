/** Every example in examples/ runs with `skein run` and ends as its README says. */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { json, ROOT, requireBuiltCli, Skein, skein, until, workspace } from "./helpers.js";

requireBuiltCli();

interface RunJson {
  status: string;
  output: Record<string, unknown>;
  nodes: { node_id: string; state: string; visit: number; attempt: number }[];
}

const example = (name: string) => [
  join(ROOT, "examples", name, "workflow.json"),
  "--agents",
  join(ROOT, "examples", name, "agents.ts"),
];

async function run(name: string, input: unknown): Promise<RunJson> {
  const ws = workspace();
  const r = await skein(["--db", ws.db, "run", ...example(name), "--input", JSON.stringify(input), "--json"], ws.dir);
  expect(r.code, r.stderr).toBe(0);
  return json<RunJson>(r);
}

const node = (run: RunJson, id: string) => run.nodes.find((n) => n.node_id === id);

describe("examples", () => {
  it("content-publish: retries the 502, loops through rework once, publishes to three platforms", async () => {
    const r = await run("content-publish", { topic: "durable agents" });
    expect(r.status).toBe("SUCCEEDED");
    expect(node(r, "fetch_b")).toMatchObject({ state: "SUCCEEDED", attempt: 2 });
    expect(node(r, "review")).toMatchObject({ state: "SUCCEEDED", visit: 2 });
    expect(node(r, "rework")).toMatchObject({ state: "SKIPPED", visit: 2 });
    expect(Object.keys(r.output.summary as object).sort()).toEqual(["publish_a", "publish_b", "publish_c"]);
  });

  it("branch-merge: a question takes the answer branch, a statement the summary branch", async () => {
    const question = await run("branch-merge", { text: "is it durable?" });
    expect(question.output).toEqual({ reply: { answer: { answer: "Answer to: is it durable?" } } });
    expect(node(question, "summarize")?.state).toBe("SKIPPED");
    const statement = await run("branch-merge", { text: "it is durable" });
    expect(statement.output).toEqual({ reply: { summarize: { summarize: "Summary of: it is durable" } } });
    expect(node(statement, "answer")?.state).toBe("SKIPPED");
  });

  it("loop: revises until the third critique passes", async () => {
    const r = await run("loop", {});
    expect(r.output).toEqual({ publish: { published: "draft v3" } });
    expect(node(r, "critique")).toMatchObject({ state: "SUCCEEDED", visit: 3 });
  });

  it("timeout-retry: the flaky call succeeds on attempt 3, the hung one after its timeout", async () => {
    const r = await run("timeout-retry", {});
    expect(r.output).toEqual({ report: { flaky_api: { attempts: 3 }, slow_tool: { attempts: 2 } } });
  });

  it("research-map: plans five questions, answers them four at a time (one retried), reports them in order", async () => {
    const r = await run("research-map", { topic: "durable agents" });
    expect(r.status).toBe("SUCCEEDED");
    expect(node(r, "answer")?.state).toBe("SUCCEEDED");
    const report = r.output.report as {
      title: string;
      questions: number;
      most_researchers_at_once: number;
      report: string;
    };
    expect(report.title).toBe("Research report: durable agents");
    expect(report.questions).toBe(5);
    // max_concurrency 4: more than one question at a time, never more than four.
    expect(report.most_researchers_at_once).toBeGreaterThan(1);
    expect(report.most_researchers_at_once).toBeLessThanOrEqual(4);
    const headings = report.report.split("\n").filter((line) => line.startsWith("## "));
    expect(headings).toEqual([
      "## 1. What is durable agents?",
      "## 2. Why does durable agents matter?",
      "## 3. How does durable agents work?",
      "## 4. What can go wrong with durable agents?",
      "## 5. What comes next for durable agents?",
    ]);
    // The rate-limited item retried in its own run; the others succeeded at once.
    expect(report.report).toContain('Notes on "How does durable agents work?" (durable agents), found on attempt 2.');
    expect(report.report.match(/found on attempt 1\./g)).toHaveLength(4);
  });

  it("order-approval: reserves and charges, waits for a person's approval (skein review elsewhere), then ships", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    const input = { order_id: "A-1", sku: "SKU-9", quantity: 2, amount: 49.5 };
    const running = new Skein(["run", ...example("order-approval"), "--input", JSON.stringify(input), ...db], ws.dir);
    const runId = (await running.waitFor(/^run (\S+) started$/m))[1] as string;
    await running.waitFor(/review\.requested approval#1 waiting for ops-lead or finance: Approve order A-1/);
    await until(
      "skein reviews lists the approval",
      async () => (await skein(["reviews", ...db], ws.dir)).stdout,
      (text) => text.includes(runId),
    );
    const approved = await skein(["review", runId, "approval", "approve", "--by", "ops-lead", ...db], ws.dir);
    expect(approved.code, approved.stderr).toBe(0);
    const r = await running.result();
    expect(r.code, r.stderr).toBe(0);
    // The decision, written by another process, shows in the live lines, in order.
    expect(r.stdout).toMatch(/review\.decided +approval#1 approve by ops-lead\n.*node\.succeeded +approval#1/s);
    expect(r.stdout).toMatch(/^ +\d+ ms {2}run\.succeeded +SUCCEEDED$/m);
    expect(r.stdout).toMatch(/^ship +SUCCEEDED +1 +1 +0 /m);
    expect(r.stderr).toMatch(/reserve_stock#1: reserved 2 x SKU-9 \(res-[0-9a-f]{10}\)/);
  });
});
