/**
 * Skein on SQLite (synchronous normal or full) or PostgreSQL: every shape registered as a
 * workflow, one in-process agent per agent type calling `work`, run ends seen through one
 * `subscribe` listener (bench/dag8-loop.ts RunEnds), as the Skein bench does.
 */
import type Database from "better-sqlite3";
import { type AgentHandler, createClient, createEngine, type Engine } from "../../../src/index.js";
import { RunEnds } from "../../dag8-loop.js";
import { wallNow } from "../../lib.js";
import { SHAPE_IDS, type Shape, shapeById, W6_CONCURRENCY } from "../shapes.js";
import { PAYLOAD, plan, work } from "../steps.js";
import type { System, SystemConfig } from "./system.js";

/** The Skein bench's setting: nothing waits on the engine's limit of attempts in flight (default 100). */
const MAX_CONCURRENCY = 1000;

/**
 * W6 as Skein users write it: a `map` over the list the plan step returned, each item an agent
 * call, `max_concurrency` at a time, and a join that reads the map's output (the items' outputs
 * in item order). The map's items are rows in the database, each a child run.
 */
const FAN_OUT = {
  id: "peers-w6",
  nodes: [
    { node_id: "plan", agent_type: "w6_plan", payload: { n: "{{ input.n }}" } },
    {
      node_id: "fan",
      agent_type: "map",
      depends_on: ["plan"],
      payload: {
        items: "{{ nodes.plan.output.items }}",
        each: { agent_type: "w6_item", payload: { item: "{{ item }}" } },
        max_concurrency: W6_CONCURRENCY,
      },
    },
    { node_id: "join", agent_type: "w6_join", depends_on: ["fan"], payload: { outputs: "{{ nodes.fan.output }}" } },
  ],
};

export function skein(config: SystemConfig & { synchronous?: "normal" | "full" }): System {
  const database = config.pgUrl
    ? `${config.pgUrl}${config.pgUrl.includes("?") ? "&" : "?"}schema=skein`
    : `sqlite:${config.sqlitePath}`;
  const handler: AgentHandler = async (task) => ({ data: await work(task.run_id, task.node_id) });
  const agentTypes = new Set(SHAPE_IDS.flatMap((id) => shapeById(id).nodes.map((n) => n.agent_type)));
  const agents: Record<string, AgentHandler> = {
    ...Object.fromEntries([...agentTypes].map((t) => [t, handler])),
    w6_plan: async (task) => ({ items: await plan(task.run_id, Number((task.payload as { n: number }).n)) }),
    w6_item: async (task) => ({ data: await work(task.run_id, "item") }),
    w6_join: async (task) => {
      const outputs = (task.payload as { outputs: unknown[] }).outputs;
      return { data: await work(task.run_id, "join"), joined: outputs.length };
    },
  };
  let engine: Engine | null = null;
  let ends: RunEnds | null = null;

  const open = async () => {
    engine = await createEngine({ database, agents, maxConcurrency: MAX_CONCURRENCY, synchronous: config.synchronous });
    ends = new RunEnds(engine, wallNow);
    for (const id of SHAPE_IDS) await engine.registerWorkflow(shapeById(id));
    await engine.registerWorkflow(FAN_OUT);
  };
  const opened = () => {
    if (!engine || !ends) throw new Error("skein: not open");
    return { engine, ends };
  };

  /**
   * One value from the engine's own write connection (total_changes() counts per connection),
   * reached through private fields: read only, the bench changes nothing there.
   */
  const sqlite = (query: string): unknown => {
    const store = (opened().engine as unknown as { store: { writer: Database.Database } }).store;
    return store.writer.prepare(query).pluck().get();
  };

  return {
    open,
    async close() {
      await engine?.close();
      engine = null;
      ends = null;
    },
    async run(shape: Shape) {
      const { engine, ends } = opened();
      const run = await engine.startRun(shape.id, { input: { data: PAYLOAD } });
      const end = await ends.wait(run.run_id);
      if (end.type !== "run.succeeded") throw new Error(`skein: run ${run.run_id} ended ${end.type}`);
    },
    async fanOut(n: number, concurrency: number) {
      if (concurrency !== W6_CONCURRENCY)
        throw new Error(`skein: W6 is registered with max_concurrency ${W6_CONCURRENCY}`);
      const { engine, ends } = opened();
      const run = await engine.startRun(FAN_OUT.id, { input: { n } });
      const end = await ends.wait(run.run_id);
      if (end.type !== "run.succeeded") throw new Error(`skein: W6 run ${run.run_id} ended ${end.type}`);
    },
    async startMany(shape: Shape, keys: string[]) {
      const { engine } = opened();
      const runs = await Promise.all(keys.map(() => engine.startRun(shape.id, { input: { data: PAYLOAD } })));
      return runs.map((r) => r.run_id);
    },
    async committedSteps(keys: string[]) {
      // Through a client (no engine), before the engine that recovers opens.
      const client = await createClient({ database });
      try {
        const out: string[] = [];
        for (const key of keys) {
          for (const v of await client.listVisits(key)) {
            if (v.state === "SUCCEEDED") out.push(`${v.run_id} ${v.node_id}`);
          }
        }
        return out;
      } finally {
        await client.close();
      }
    },
    async resume(_shape: Shape, keys: string[], onDone: (key: string) => void) {
      // Recovery is the engine's own: opening it puts the dead engine's attempts back.
      await open();
      const { engine } = opened();
      await Promise.all(
        keys.map(async (key) => {
          const run = await engine.waitForRun(key);
          if (run.status !== "SUCCEEDED") throw new Error(`skein: run ${key} ended ${run.status}`);
          onDone(key);
        }),
      );
    },
    sqliteChanges: config.sqlitePath ? () => sqlite("SELECT total_changes()") as number : undefined,
    settings: () => ({
      store: config.pgUrl ? "postgresql" : "sqlite",
      synchronous: config.pgUrl ? "synchronous_commit=on (server default)" : (config.synchronous ?? "normal"),
      maxConcurrency: MAX_CONCURRENCY,
      ...(config.sqlitePath ? { sqlite_version: sqlite("SELECT sqlite_version()") } : {}),
    }),
  };
}
