/**
 * Event triggers from the command line (DESIGN §17): `skein validate` and `skein workflows` show
 * the events a workflow starts on, and `skein status` shows the event that started a run.
 */
import { describe, expect, it } from "vitest";
import { createEngine } from "../../src/index.js";
import { commandsMs, json, requireBuiltCli, skein, workspace } from "./helpers.js";

requireBuiltCli();

const INVOICE = {
  id: "invoice",
  triggers: [
    { event: "order.paid", key: "vip", input: { order: "{{ event.key }}", vip: true } },
    { event: "order.paid", input: { order: "{{ event.key }}" } },
  ],
  // `later` has no agent here: a started run waits at its first node.
  nodes: [{ node_id: "bill", agent_type: "later" }],
};

describe("triggers in the CLI", () => {
  it("validate and workflows show a workflow's triggers; status shows the event that started a run", {
    timeout: commandsMs(7),
  }, async () => {
    const ws = workspace();
    const file = ws.file("invoice.json", INVOICE);
    const valid = await skein(["validate", file], ws.dir);
    expect(valid.code, valid.stderr).toBe(0);
    expect(valid.stdout).toContain('valid workflow "invoice" (1 nodes; triggers: order.paid (key vip), order.paid)');
    expect((await skein(["workflows", "put", file, "--db", ws.db], ws.dir)).stdout).toBe("invoice v1 created\n");
    const plain = ws.file("plain.json", { id: "plain", nodes: [{ node_id: "a", agent_type: "later" }] });
    expect((await skein(["workflows", "put", plain, "--db", ws.db], ws.dir)).code).toBe(0);

    const list = await skein(["workflows", "--db", ws.db], ws.dir);
    const rows = list.stdout.trim().split("\n");
    expect(rows[0]).toMatch(/^id\s+version\s+registered\s+triggers$/);
    expect(rows.find((r) => r.startsWith("invoice"))).toMatch(/\sorder\.paid \(key vip\), order\.paid$/);
    expect(rows.find((r) => r.startsWith("plain"))).toMatch(/\s-$/);
    expect(json(await skein(["workflows", "--json", "--db", ws.db], ws.dir))).toMatchObject([
      { id: "invoice", version: 1, triggers: INVOICE.triggers },
      { id: "plain", version: 1, triggers: [] },
    ]);

    const engine = await createEngine({ database: ws.db });
    const published = await engine.publishEvent("order.paid", "o-1", {}, { idempotency_key: "pay-1" });
    await engine.close();
    const runId = published.started[0]?.run_id as string;
    const status = await skein(["status", runId, "--db", ws.db], ws.dir);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout.split("\n")[1]).toBe(
      `triggered by event order.paid (key o-1, event ${published.event_id}, idempotency key pay-1)`,
    );
    expect(json(await skein(["status", runId, "--json", "--db", ws.db], ws.dir))).toMatchObject({
      input: { order: "o-1" },
      triggered_by: { event: "order.paid", key: "o-1", idempotency_key: "pay-1" },
    });
  });
});
