import { describe, expect, it } from "vitest";
import { createClient, type Task } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

describe("createClient", () => {
  it("registers and starts runs beside the file's engine, which picks them up on its sweep", async () => {
    const { engine, clock, database } = await testEngine({ agents: { echo: (t: Task) => t.input } });
    const client = await createClient({ database, clock });
    try {
      await client.registerWorkflow({ id: "echo", nodes: [{ node_id: "a", agent_type: "echo" }] });
      const run = await client.startRun("echo", { input: { hello: "world" } });
      expect((await client.getRun(run.run_id)).nodes[0]?.state).toBe("PENDING");

      const ended = nextEvent(engine, (e) => e.type === "run.succeeded" && e.run_id === run.run_id);
      await clock.advance(1_000); // the engine's periodic sweep finds the ready visit
      await ended;
      const done = await client.getRun(run.run_id);
      expect(done.status).toBe("SUCCEEDED");
      expect(done.output).toEqual({ a: { hello: "world" } });
    } finally {
      await client.close();
    }
  });
});
