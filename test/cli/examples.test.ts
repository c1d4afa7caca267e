/**
 * Examples end to end with the built `skein` CLI: `skein run` in one process, `skein review` in
 * another; an agent node's model and MCP server given by the environment. Every example's
 * behaviour is tested on createTestEngine() in test/examples/.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { startModelServer } from "../../examples/support-agent/model-server.js";
import { ROOT, requireBuiltCli, Skein, skein, until, workspace } from "./helpers.js";

requireBuiltCli();

const example = (name: string) => [
  join(ROOT, "examples", name, "workflow.json"),
  "--agents",
  join(ROOT, "examples", name, "agents.ts"),
];

describe("examples", () => {
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

  it("support-agent: skein run reaches the model and the MCP server the environment names", async () => {
    const ws = workspace();
    const dir = join(ROOT, "examples", "support-agent");
    const model = await startModelServer();
    try {
      const config = ws.file("mcp.json", {
        servers: {
          helpcenter: {
            command: process.execPath,
            args: ["--import", "tsx", join(dir, "helpcenter-server.ts")],
            cwd: dir,
          },
        },
      });
      const env = { SKEIN_LLM_BASE_URL: model.baseUrl, SKEIN_MCP_CONFIG: config };
      const input = JSON.stringify({ message: "How do returns work for order A1002?" });
      const args = ["run", ...example("support-agent"), "--input", input, "--json", "--db", ws.db];
      const r = await new Skein(args, ws.dir, env).result();
      expect(r.code, r.stderr).toBe(0);
      const output = JSON.parse(r.stdout).nodes[0].output as { content: string; tool_calls: number };
      expect(output.tool_calls).toBe(2);
      expect(output.content).toMatch(/Your order A1002 .* is delivered/);
      expect(output.content).toMatch(/From our help center: Returns:/);

      const missing = await new Skein(args, ws.dir, { ...env, SKEIN_MCP_CONFIG: join(ws.dir, "nope.json") }).result();
      expect(missing.code).toBe(2);
      expect(missing.stderr).toMatch(/cannot read MCP config \(SKEIN_MCP_CONFIG\) .*nope\.json: no such file/);
    } finally {
      await model.close();
    }
  });
});
