/**
 * The agent node (DESIGN §14.2): what one turn of its tool-calling loop costs the engine on SQLite,
 * and what it stores.
 *
 * The model is a local server speaking the OpenAI protocol over real HTTP (node:http, in this
 * process, on 127.0.0.1): it reads each request's body without parsing it and answers at once
 * with a JSON completion (`application/json`, prepared before the visit starts), a tool call for
 * each turn but the last, a text answer for the last. Each call runs the tool `search`, an
 * in-process agent that returns a 200-byte string at once. The call's arguments are 100 bytes
 * of JSON; the final answer 200 bytes of text. The visit's `max_turns` is 1000.
 *
 * - `agent_turn_overhead_ms`: the p50 of one turn's wall time, from one model request arriving
 *   at the server (its headers parsed) to the next: the server's answer (its handling time is
 *   in `meta.agent_turn.server_p50_ms`, a few µs), the `llm` handler reading it (node:http, a kept-alive connection), the
 *   step `turn:<n>` recorded and committed, the tool's step `tool:<n>:<0>` (arguments checked
 *   against the tool's parameters, the agent run, the result recorded and committed), the next
 *   request assembled from the recorded messages and sent. The engine is idle otherwise. Each
 *   request carries the whole conversation so far (the protocol is stateless), so a turn costs
 *   more as the visit grows: the samples are the TURNS − 1 turns of one visit of TURNS turns.
 *   After WARMUP visits, the median of WINDOWS visits' p50s (the machine is shared). Target < 2.
 * - `agent_bytes_per_turn_10`, `agent_bytes_per_turn_100`: what a visit of 10 (100) turns stores
 *   per turn: the sum of its steps' `size` (the bytes of each recorded output's JSON, the
 *   `steps.size` column: its turns' assistant messages and its calls' tool messages, the
 *   conversation's one row a message) over its turns. Rows' keys, SQLite's page and index
 *   overhead and the visit's own rows (constant per visit) are not counted.
 *   `agent_bytes_ratio_100_10`: the first over the second. Target <= 1.2: a message is stored
 *   once, never again with each later turn (storage linear in the turns, not quadratic).
 *
 * `npx tsx bench/agent-turn.ts` runs it alone and prints the metrics.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { createEngine, type Engine } from "../src/index.js";
import { type Measured, percentile, progress, tempDb, within } from "./lib.js";

/** Turns a timed visit makes (the last answers), timed visits (the metric is their median p50), warm-up visits. */
const TURNS = 100;
const WINDOWS = 5;
const WARMUP = 2;
/** The turns of the shorter visit whose storage per turn is compared with a TURNS-turn one's. */
const SHORT_TURNS = 10;
const COMPLETIONS_PATH = "/v1/chat/completions";

/** 100 bytes of JSON arguments (the width of `n` is fixed: every turn's are the same size). */
function argumentsOf(n: number): string {
  const head = { query: `order status for customer ${String(n).padStart(5, "0")}`, limit: 5 };
  const text = JSON.stringify({ ...head, note: "" });
  return JSON.stringify({ ...head, note: "x".repeat(100 - text.length) });
}
/** The tool's result: a 200-byte string. */
const TOOL_RESULT = padded("order 12345: shipped on 2024-05-01 by ground, tracking 1Z999AA10123456784; ", 200);
/** The final answer: 200 bytes of text. */
const FINAL_TEXT = padded("All orders are accounted for: shipped, in transit or delivered. ", 200);

function padded(text: string, length: number): string {
  return text + "y".repeat(length - text.length);
}

/** The JSON completion of turn `n` of a visit of `turns` turns: a tool call, the last one the answer. */
function completionOf(n: number, turns: number): string {
  const usage = { prompt_tokens: 100 * n, completion_tokens: 20, total_tokens: 100 * n + 20 };
  const message =
    n < turns
      ? {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: `call_${String(n).padStart(5, "0")}`,
              type: "function",
              function: { name: "search", arguments: argumentsOf(n) },
            },
          ],
        }
      : { role: "assistant", content: FINAL_TEXT };
  return JSON.stringify({
    id: `chatcmpl-bench-${n}`,
    object: "chat.completion",
    created: 1_700_000_000,
    model: "bench-model",
    choices: [{ index: 0, message, finish_reason: n < turns ? "tool_calls" : "stop" }],
    usage,
  });
}

/** The model: answers the completions of the visit planned last, in order, and times each request. */
interface ModelServer {
  baseUrl: string;
  /** The next visit makes `turns` turns: its answers, prepared now; its times, cleared. */
  plan(turns: number): void;
  /** For each request of the visit so far: when it arrived (headers parsed) and when its answer was written (ms). */
  arrived: number[];
  answered: number[];
  close(): Promise<void>;
}

async function startModelServer(): Promise<ModelServer> {
  let answers: string[] = [];
  const arrived: number[] = [];
  const answered: number[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const at = performance.now();
    // Read to its end (the connection is kept alive for the next request), not parsed.
    req.on("data", () => {});
    req.on("end", () => {
      const answer = req.method === "POST" && req.url === COMPLETIONS_PATH ? answers[arrived.length] : undefined;
      if (answer === undefined) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `bench model: no answer for ${req.method} ${req.url}` } }));
        return;
      }
      arrived.push(at);
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) });
      res.end(answer);
      answered.push(performance.now());
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    plan(turns) {
      answers = Array.from({ length: turns }, (_, i) => completionOf(i + 1, turns));
      arrived.length = 0;
      answered.length = 0;
    },
    arrived,
    answered,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

const WORKFLOW = {
  id: "agent-turn",
  nodes: [
    {
      node_id: "assist",
      agent_type: "agent",
      timeout: 3600,
      payload: {
        model: "bench-model",
        instructions: "You answer questions about orders. Look them up with search, then answer.",
        input: "{{ input.question }}",
        max_turns: 1000,
        tools: [
          {
            name: "search",
            description: "Searches the orders",
            parameters: {
              type: "object",
              properties: { query: { type: "string" }, limit: { type: "integer" }, note: { type: "string" } },
              required: ["query"],
            },
            agent_type: "search",
          },
        ],
      },
    },
  ],
};

/** One visit of `turns` turns: its per-turn wall times and server times (ms), and the bytes its steps store. */
async function visit(
  engine: Engine,
  model: ModelServer,
  turns: number,
): Promise<{ wall: number[]; server: number[]; bytes: number; steps: number }> {
  model.plan(turns);
  const { run_id } = await engine.startRun("agent-turn", { input: { question: "Where are my orders?" } });
  const run = await within(engine.waitForRun(run_id), 120_000, `an agent visit of ${turns} turns`);
  const output = run.nodes[0]?.output as { turns?: number; tool_calls?: number } | undefined;
  if (run.status !== "SUCCEEDED" || output?.turns !== turns || output.tool_calls !== turns - 1) {
    throw new Error(
      `the agent visit of ${turns} turns ended ${run.status} with ${JSON.stringify(output ?? run.nodes[0]?.error ?? null)}`,
    );
  }
  const { arrived, answered } = model;
  if (arrived.length !== turns) throw new Error(`the model was asked ${arrived.length} times, not ${turns}`);
  const wall: number[] = [];
  const server: number[] = [];
  for (let i = 0; i + 1 < turns; i++) {
    wall.push((arrived[i + 1] as number) - (arrived[i] as number));
    server.push((answered[i] as number) - (arrived[i] as number));
  }
  const steps = await engine.listSteps(run_id, "assist");
  return { wall, server, bytes: steps.reduce((sum, s) => sum + s.size, 0), steps: steps.length };
}

export async function benchAgentTurn(): Promise<Measured> {
  if (argumentsOf(1).length !== 100 || TOOL_RESULT.length !== 200 || FINAL_TEXT.length !== 200) {
    throw new Error("the arguments must be 100 bytes, the tool's result and the answer 200");
  }
  const db = tempDb("agent-turn");
  const model = await startModelServer();
  const engine = await createEngine({
    database: db.url,
    llm: { providers: { default: { base_url: model.baseUrl, api_key: "sk-bench" } } },
    agents: { search: () => TOOL_RESULT },
  });
  try {
    await engine.registerWorkflow(WORKFLOW);
    for (let i = 0; i < WARMUP; i++) await visit(engine, model, TURNS);
    const windows: {
      p50: number;
      p90: number;
      mean: number;
      server: number;
      first10: number;
      last10: number;
      bytes: number;
    }[] = [];
    for (let i = 0; i < WINDOWS; i++) {
      const v = await visit(engine, model, TURNS);
      windows.push({
        p50: percentile(v.wall, 50),
        p90: percentile(v.wall, 90),
        mean: v.wall.reduce((a, b) => a + b, 0) / v.wall.length,
        server: percentile(v.server, 50),
        first10: percentile(v.wall.slice(0, 10), 50),
        last10: percentile(v.wall.slice(-10), 50),
        bytes: v.bytes,
      });
    }
    const short = await visit(engine, model, SHORT_TURNS);
    windows.sort((a, b) => a.p50 - b.p50);
    const median = windows[Math.floor(WINDOWS / 2)] as (typeof windows)[number];
    const failures: string[] = [];
    if (windows.some((w) => w.bytes !== median.bytes)) {
      failures.push(`agent_turn: visits of ${TURNS} turns stored different bytes: ${windows.map((w) => w.bytes)}`);
    }
    const perTurn100 = median.bytes / TURNS;
    const perTurn10 = short.bytes / SHORT_TURNS;
    progress(`agent_turn: ${WARMUP} + ${WINDOWS} visits of ${TURNS} turns, one of ${SHORT_TURNS}`);
    return {
      metrics: {
        agent_turn_overhead_ms: median.p50,
        agent_bytes_per_turn_10: perTurn10,
        agent_bytes_per_turn_100: perTurn100,
        agent_bytes_ratio_100_10: perTurn100 / perTurn10,
      },
      meta: {
        agent_turn: {
          windows: WINDOWS,
          turns: TURNS,
          p50_min: windows[0]?.p50,
          p50_max: windows[WINDOWS - 1]?.p50,
          // Of the median window: its p90 and mean, the server's share of a turn, the first and last ten turns' p50.
          p90_ms: median.p90,
          mean_ms: median.mean,
          server_p50_ms: median.server,
          p50_turns_1_10_ms: median.first10,
          p50_turns_90_99_ms: median.last10,
          bytes_100: median.bytes,
          bytes_10: short.bytes,
          steps_10: short.steps,
        },
      },
      failures,
    };
  } finally {
    await engine.close();
    await model.close();
    db.cleanup();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(JSON.stringify(await benchAgentTurn(), null, 2));
}
