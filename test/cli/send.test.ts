/** `skein send`: an event from the command line to a run parked in a wait_event (DESIGN §11.2). */
import { describe, expect, it } from "vitest";
import { createEngine, type RunEvent } from "../../src/index.js";
import { nextEvent } from "../helpers.js";
import { json, requireBuiltCli, skein, workspace } from "./helpers.js";

requireBuiltCli();

describe("skein send", () => {
  it("delivers to the waiting node, keeps an early event in the inbox, and refuses a finished run (exit 2)", async () => {
    const ws = workspace();
    const engine = await createEngine({ database: ws.db });
    await engine.registerWorkflow({
      id: "pay",
      nodes: [{ node_id: "paid", agent_type: "wait_event", payload: { event: "paid" } }],
    });
    // `later` has no agent here: the run waits there, before its wait_event begins.
    await engine.registerWorkflow({
      id: "early",
      nodes: [
        { node_id: "first", agent_type: "later", next_on_success: "paid" },
        { node_id: "paid", agent_type: "wait_event", payload: { event: "paid" } },
      ],
    });
    const parked = nextEvent(engine, (e: RunEvent) => e.type === "node.waiting");
    const run = await engine.startRun("pay");
    await parked;
    const early = await engine.startRun("early");
    await engine.close();

    const file = ws.file("payload.json", { amount: 12 });
    const sent = await skein(["send", run.run_id, "paid", "--payload", `@${file}`, "--db", ws.db], ws.dir);
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toBe("event paid delivered to paid (visit 1)\n");
    const status = json<{ status: string; nodes: { output: unknown }[] }>(
      await skein(["status", run.run_id, "--json", "--db", ws.db], ws.dir),
    );
    expect(status).toMatchObject({ status: "SUCCEEDED", nodes: [{ output: { amount: 12 } }] });

    const late = await skein(["send", run.run_id, "paid", "--db", ws.db], ws.dir);
    expect(late.code).toBe(2);
    expect(late.stderr).toMatch(/already ended SUCCEEDED; it takes no more events/);

    const kept = await skein(["send", early.run_id, "paid", "--payload", "7", "--json", "--db", ws.db], ws.dir);
    expect(kept.code, kept.stderr).toBe(0);
    expect(json(kept)).toMatchObject({ delivered_to: null, buffered: true, duplicate: false });

    const bad = await skein(["send", early.run_id, "paid", "--payload", "{nope", "--db", ws.db], ws.dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--payload/);
  });
});
