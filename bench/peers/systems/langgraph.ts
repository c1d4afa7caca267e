/**
 * LangGraph.js 1.7 with its SQLite checkpointer (@langchain/langgraph-checkpoint-sqlite 1.0):
 * each shape is a StateGraph whose edges are its dependencies (`addEdge([a, b, c], "review")`
 * waits for all three), compiled with a SqliteSaver; a run is `invoke` on a new thread.
 * Defaults: durability "async" (a superstep's checkpoint is written while the next one runs;
 * SqliteSaver writes synchronously, so in effect before), SqliteSaver's WAL journal, and the
 * synchronous=NORMAL that better-sqlite3's SQLite has by default in WAL mode (Skein's default too). LangGraph does not resume a thread by itself: after a crash the
 * application finds its unfinished threads and invokes each with a null input (W5 does that).
 */
import { randomUUID } from "node:crypto";
import { Annotation, END, type LangGraphRunnableConfig, Send, START, StateGraph } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { SHAPE_IDS, type Shape, shapeById } from "../shapes.js";
import { PAYLOAD, plan, work } from "../steps.js";
import type { System, SystemConfig } from "./system.js";

/**
 * The run's input and each node's output: a DAG's nodes add theirs to `results` (a join reads
 * its dependencies'), a sequence's step replaces `last` (a chain hands its output on; keeping
 * all 100 would re-save a growing map in every checkpoint).
 */
const State = Annotation.Root({
  input: Annotation<string>(),
  last: Annotation<string>(),
  results: Annotation<Record<string, string>>({ reducer: (a, b) => ({ ...a, ...b }), default: () => ({}) }),
});
type Update = Partial<typeof State.State>;

/** StateGraph types its node names from literal strings; the shapes name their nodes at run time. */
interface Graph {
  addNode(name: string, fn: (state: typeof State.State, config: LangGraphRunnableConfig) => Promise<Update>): Graph;
  addEdge(from: string | string[], to: string): Graph;
  compile(options: { checkpointer: SqliteSaver }): Compiled;
}
interface Compiled {
  invoke(
    input: Update | null,
    config: { configurable: { thread_id: string }; recursionLimit: number },
  ): Promise<unknown>;
}

function build(shape: Shape, checkpointer: SqliteSaver): Compiled {
  const chain = shape.id.startsWith("seq-");
  const graph = new StateGraph(State) as unknown as Graph;
  for (const node of shape.nodes) {
    graph.addNode(node.node_id, async (_state, config) => {
      const out = await work(String(config.configurable?.thread_id), node.node_id);
      return chain ? { last: out } : { results: { [node.node_id]: out } };
    });
  }
  const hasSuccessor = new Set(shape.nodes.flatMap((n) => n.depends_on ?? []));
  for (const node of shape.nodes) {
    const deps = node.depends_on ?? [];
    graph.addEdge(deps.length === 0 ? START : deps.length === 1 ? (deps[0] as string) : deps, node.node_id);
    if (!hasSuccessor.has(node.node_id)) graph.addEdge(node.node_id, END);
  }
  return graph.compile({ checkpointer });
}

/**
 * W6 with LangGraph's map-reduce idiom (its "map-reduce" how-to): the plan node's conditional
 * edge returns one `Send("item", …)` per item, the items run as tasks of one superstep, their
 * outputs gathered by a reducer, then the join. Concurrency is the run's `maxConcurrency`
 * (tasks of a superstep started at once).
 */
const FanOutState = Annotation.Root({
  n: Annotation<number>(),
  items: Annotation<string[]>(),
  value: Annotation<string>(),
  outputs: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});
type FanOutUpdate = Partial<typeof FanOutState.State>;

function buildFanOut(checkpointer: SqliteSaver) {
  const thread = (config: LangGraphRunnableConfig) => String(config.configurable?.thread_id);
  return new StateGraph(FanOutState)
    .addNode("plan", async (state, config): Promise<FanOutUpdate> => ({ items: await plan(thread(config), state.n) }))
    .addNode(
      "item",
      async (_state, config): Promise<FanOutUpdate> => ({ outputs: [await work(thread(config), "item")] }),
    )
    .addNode("join", async (state, config): Promise<FanOutUpdate> => {
      if (state.outputs.length !== state.items.length) throw new Error("langgraph: join before every item");
      await work(thread(config), "join");
      return {};
    })
    .addEdge(START, "plan")
    .addConditionalEdges("plan", (state) => state.items.map((item) => new Send("item", { value: item })))
    .addEdge("item", "join")
    .addEdge("join", END)
    .compile({ checkpointer });
}

export function langgraph(config: SystemConfig): System {
  const path = config.sqlitePath;
  if (!path) throw new Error("langgraph: needs a SQLite file");
  let saver: SqliteSaver | null = null;
  let graphs = new Map<string, Compiled>();
  let fanOutGraph: ReturnType<typeof buildFanOut> | null = null;
  const open = async () => {
    const s = SqliteSaver.fromConnString(path);
    await s.getTuple({ configurable: { thread_id: "-" } }); // creates its tables and sets WAL now, not in the first run
    saver = s;
    graphs = new Map(SHAPE_IDS.map((id) => [id, build(shapeById(id), s)]));
    fanOutGraph = buildFanOut(s);
  };
  const invoke = (shape: Shape, threadId: string, input: Update | null) => {
    const graph = graphs.get(shape.id);
    if (!graph) throw new Error(`langgraph: not open, or no graph for ${shape.id}`);
    // The default limit of 25 supersteps would stop a 100-step sequence.
    return graph.invoke(input, { configurable: { thread_id: threadId }, recursionLimit: shape.nodes.length + 10 });
  };
  return {
    open,
    async close() {
      saver?.db.close();
      saver = null;
    },
    async run(shape: Shape) {
      await invoke(shape, randomUUID(), { input: PAYLOAD });
    },
    async fanOut(n: number, concurrency: number) {
      if (!fanOutGraph) throw new Error("langgraph: not open");
      await fanOutGraph.invoke(
        { n },
        { configurable: { thread_id: randomUUID() }, maxConcurrency: concurrency, recursionLimit: 10 },
      );
    },
    async startMany(shape: Shape, keys: string[]) {
      for (const key of keys) {
        invoke(shape, key, { input: PAYLOAD }).catch(() => {}); // killed mid-run: nothing to report
      }
      return keys;
    },
    async committedSteps(keys: string[]) {
      // The last checkpoint's results, and the writes its superstep's finished nodes saved.
      const reader = SqliteSaver.fromConnString(path);
      try {
        const out: string[] = [];
        for (const key of keys) {
          const tuple = await reader.getTuple({ configurable: { thread_id: key, checkpoint_ns: "" } });
          const results = tuple?.checkpoint.channel_values.results as Record<string, string> | undefined;
          const done = new Set(Object.keys(results ?? {}));
          for (const [, channel, value] of tuple?.pendingWrites ?? []) {
            if (channel === "results") for (const node of Object.keys(value as object)) done.add(node);
          }
          for (const node of done) out.push(`${key} ${node}`);
        }
        return out;
      } finally {
        reader.db.close();
      }
    },
    async resume(shape: Shape, keys: string[], onDone: (key: string) => void) {
      await open();
      // The documented way on: invoke each thread again with no input, from its last checkpoint.
      await Promise.all(
        keys.map(async (key) => {
          await invoke(shape, key, null);
          onDone(key);
        }),
      );
    },
    sqliteChanges: () => {
      if (!saver) throw new Error("langgraph: not open");
      return saver.db.prepare("SELECT total_changes()").pluck().get() as number;
    },
    settings: () => {
      if (!saver) throw new Error("langgraph: not open");
      const synchronous = ["off", "normal", "full", "extra"][
        saver.db.pragma("synchronous", { simple: true }) as number
      ];
      return {
        store: "sqlite",
        durability: "async (default)",
        journal_mode: saver.db.pragma("journal_mode", { simple: true }),
        // SqliteSaver sets none: better-sqlite3 builds SQLite with DEFAULT_WAL_SYNCHRONOUS=1.
        synchronous: `${synchronous} (better-sqlite3's default in WAL mode)`,
        sqlite_version: saver.db.prepare("SELECT sqlite_version()").pluck().get(),
      };
    },
  };
}
