/**
 * An offline stand-in for a model: a node:http server speaking the OpenAI chat completions
 * protocol (`POST /v1/chat/completions`), so the example runs without a model or a network.
 * It answers as a real endpoint does: streamed SSE when the request says `stream: true` (as
 * Skein's do), `data:` chunks of `choices[0].delta` (text, or tool calls by index), a chunk
 * with the finish reason, one with the usage when `stream_options.include_usage`, then
 * `data: [DONE]`; one JSON completion otherwise.
 *
 * Its policy is a few fixed rules, the same answer for the same request:
 * - the last message is the user's: when it asks for an order's refund ("refund order A1001") it
 *   calls `refund_order` alone; otherwise `lookup_order` for each order id it mentions
 *   (`A1001`), and `search_articles` when it speaks of returns, refunds, shipping or delivery;
 *   both in one turn when it does both (parallel calls). Only tools the request offers are called.
 * - the last messages are tool results: it answers with text made from them (an order's
 *   status, items and dates; the article; an order it could not find).
 * - otherwise: a short greeting asking for an order id or a question.
 * Usage: prompt_tokens is the words of the messages, completion_tokens the words of the answer
 * (of the calls' names and arguments for a turn of calls).
 *
 * @example
 * const model = await startModelServer();
 * // createEngine({ llm: { providers: { default: { base_url: model.baseUrl } } } })
 * await model.close();
 *
 * Run alone (it prints each request's last message and its answer):
 *   node --import tsx examples/support-agent/model-server.ts --port 8787
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { pathToFileURL } from "node:url";

export interface ModelServer {
  /** `http://127.0.0.1:<port>/v1`: a provider's base_url. */
  baseUrl: string;
  /** Stops listening and closes every connection. */
  close(): Promise<void>;
}

export interface ModelServerOptions {
  /** @defaultValue 0: a free port */
  port?: number;
  /** Called with each completion's last message and what the server answered. */
  onAnswer?: (last: Message | undefined, answer: Answer) => void;
}

interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

interface Message {
  role: string;
  content?: string | null | { type?: string; text?: string }[];
  tool_calls?: ToolCall[];
  tool_call_id?: string;
}

interface CompletionRequest {
  model?: string;
  messages?: Message[];
  tools?: { type: string; function?: { name?: string } }[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  parallel_tool_calls?: boolean;
}

/** What the server answers one request: text, or tool calls. */
export interface Answer {
  text: string;
  tool_calls: ToolCall[];
}

const COMPLETIONS = "/v1/chat/completions";
const ORDER_ID = /\b[A-Z]\d{4}\b/gi;
const TOPIC = /\b(return\w*|refund\w*|ship\w*|deliver\w*)\b/gi;
/** "Please refund order A1001", "refund my order A1002": a refund of an order, not a question about refunds. */
const REFUND_REQUEST = /\brefund (my )?order\b/i;

export async function startModelServer(options: ModelServerOptions = {}): Promise<ModelServer> {
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    handle(req, res, options).catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `model-server: ${String(e)}`, type: "server_error" } }));
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

async function handle(req: IncomingMessage, res: ServerResponse, options: ModelServerOptions): Promise<void> {
  const path = (req.url ?? "/").split("?")[0];
  if (req.method !== "POST" || path !== COMPLETIONS) {
    return json(res, 404, { error: { message: `model-server answers POST ${COMPLETIONS} only`, type: "not_found" } });
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  let request: CompletionRequest;
  try {
    request = JSON.parse(Buffer.concat(chunks).toString("utf8")) as CompletionRequest;
  } catch {
    return json(res, 400, { error: { message: "the body is not JSON", type: "invalid_request_error" } });
  }
  const messages = request.messages ?? [];
  const answer = policy(messages, request);
  options.onAnswer?.(messages[messages.length - 1], answer);

  const model = request.model ?? "support-model";
  const finish = answer.tool_calls.length > 0 ? "tool_calls" : "stop";
  const prompt_tokens = words(messages.map((m) => `${textOf(m.content)} ${callsText(m.tool_calls ?? [])}`).join(" "));
  const completion_tokens = Math.max(1, words(`${answer.text} ${callsText(answer.tool_calls)}`));
  const usage = { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens };
  const id = `chatcmpl-${prompt_tokens}-${completion_tokens}`;
  const created = Math.floor(Date.now() / 1000);

  if (request.stream !== true) {
    const message = {
      role: "assistant",
      content: answer.text === "" ? null : answer.text,
      ...(answer.tool_calls.length > 0 ? { tool_calls: answer.tool_calls } : {}),
    };
    return json(res, 200, {
      id,
      object: "chat.completion",
      created,
      model,
      choices: [{ index: 0, message, finish_reason: finish }],
      usage,
    });
  }

  const data = (body: unknown) => res.write(`data: ${JSON.stringify(body)}\n\n`);
  const chunk = (delta: unknown, finish_reason: string | null = null) =>
    data({ id, object: "chat.completion.chunk", created, model, choices: [{ index: 0, delta, finish_reason }] });
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  chunk({ role: "assistant", content: "" });
  // Text a few words at a time, as a model streams it.
  for (const part of answer.text.match(/\S+\s*/g) ?? []) chunk({ content: part });
  answer.tool_calls.forEach((call, index) => {
    // A call's first fragment has its id and name; its arguments follow in pieces.
    chunk({
      tool_calls: [{ index, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } }],
    });
    const args = call.function.arguments;
    const half = Math.ceil(args.length / 2);
    for (const piece of [args.slice(0, half), args.slice(half)]) {
      if (piece !== "") chunk({ tool_calls: [{ index, function: { arguments: piece } }] });
    }
  });
  chunk({}, finish);
  if (request.stream_options?.include_usage === true) {
    data({ id, object: "chat.completion.chunk", created, model, choices: [], usage });
  }
  res.end("data: [DONE]\n\n");
}

/** The rules (module doc): calls for a user's message, an answer from tool results, else a greeting. */
export function policy(
  messages: Message[],
  request: Pick<CompletionRequest, "tools" | "parallel_tool_calls"> = {},
): Answer {
  const last = messages[messages.length - 1];
  if (last?.role === "tool") return { text: answerFromTools(messages), tool_calls: [] };
  if (last?.role === "user") {
    const text = textOf(last.content);
    const offered = new Set((request.tools ?? []).map((t) => t.function?.name));
    const turn = messages.filter((m) => m.role === "assistant").length + 1;
    const calls: { name: string; args: Record<string, string> }[] = [];
    const ids = new Set((text.match(ORDER_ID) ?? []).map((id) => id.toUpperCase()));
    if (offered.has("refund_order") && REFUND_REQUEST.test(text) && ids.size > 0) {
      // A refund asked for: that call alone (it waits for a person's approval).
      for (const order_id of ids) calls.push({ name: "refund_order", args: { order_id, reason: text } });
    } else if (offered.has("lookup_order")) {
      for (const order_id of ids) calls.push({ name: "lookup_order", args: { order_id } });
    }
    const topics = new Set((text.match(TOPIC) ?? []).map((w) => w.toLowerCase()));
    if (offered.has("search_articles") && topics.size > 0 && calls[0]?.name !== "refund_order") {
      calls.push({ name: "search_articles", args: { query: [...topics].join(" ") } });
    }
    const asked = request.parallel_tool_calls === false ? calls.slice(0, 1) : calls;
    if (asked.length > 0) {
      return {
        text: "",
        tool_calls: asked.map((c, i) => ({
          id: `call_${turn}_${i}`,
          type: "function",
          function: { name: c.name, arguments: JSON.stringify(c.args) },
        })),
      };
    }
  }
  return {
    text: "Hello! I can look up an order (give me its id, such as A1001) or answer questions about returns, refunds and shipping.",
    tool_calls: [],
  };
}

/** A reply made from the tool messages after the last assistant message. */
function answerFromTools(messages: Message[]): string {
  let start = messages.length;
  while (start > 0 && messages[start - 1]?.role === "tool") start--;
  const asked = messages[start - 1]?.tool_calls ?? [];
  const parts: string[] = [];
  for (const result of messages.slice(start)) {
    const call = asked.find((c) => c.id === result.tool_call_id);
    const content = textOf(result.content);
    if (call?.function.name === "lookup_order") parts.push(orderSentence(content, call.function.arguments));
    else if (call?.function.name === "refund_order") parts.push(refundSentence(content, call.function.arguments));
    else if (content.startsWith("error: "))
      parts.push(`I could not use the ${call?.function.name ?? "tool"} tool (${content.slice(7)}).`);
    else parts.push(`From our help center: ${content}`);
  }
  return parts.join(" ");
}

/** A refund done, or declined by the person who reviewed it (`rejected by <by>: <comment>`). */
function refundSentence(content: string, args: string): string {
  const asked = (JSON.parse(args || "{}") as { order_id?: string }).order_id ?? "?";
  if (content.startsWith("rejected by ")) {
    return `I could not refund order ${asked}: our support team did not approve it (${content.slice(12)}).`;
  }
  if (content.startsWith("error: ")) return `I could not refund order ${asked} (${content.slice(7)}).`;
  return `Order ${asked} is refunded in full; the money is back on your card within 5 days.`;
}

function orderSentence(content: string, args: string): string {
  const asked = (JSON.parse(args || "{}") as { order_id?: string }).order_id ?? "?";
  if (content.startsWith("error: ")) {
    return `I could not find order ${asked} (${content.slice(7)}); please check the order number.`;
  }
  let order: Record<string, unknown>;
  try {
    order = JSON.parse(content) as Record<string, unknown>;
  } catch {
    return `Order ${asked}: ${content}.`;
  }
  const items = Array.isArray(order.items) ? ` (${order.items.join(", ")})` : "";
  const dates = [
    order.shipped_on ? `it shipped on ${order.shipped_on}` : null,
    order.delivered_on ? `it was delivered on ${order.delivered_on}` : null,
    order.expected_by && !order.delivered_on ? `it should arrive by ${order.expected_by}` : null,
  ].filter((d) => d !== null);
  return `Your order ${order.order_id ?? asked}${items} is ${order.status}${dates.length > 0 ? `: ${dates.join(", ")}` : ""}.`;
}

function textOf(content: Message["content"]): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => p.text ?? "").join(" ");
  return "";
}

function callsText(calls: ToolCall[]): string {
  return calls.map((c) => `${c.function.name} ${c.function.arguments}`).join(" ");
}

function words(text: string): number {
  return text.split(/\s+/).filter((w) => w !== "").length;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

// Run alone: `node --import tsx examples/support-agent/model-server.ts [--port 8787]`.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const i = process.argv.indexOf("--port");
  const port = i === -1 ? 8787 : Number(process.argv[i + 1]);
  const server = await startModelServer({
    port,
    onAnswer: (last, answer) => {
      const said =
        answer.tool_calls.map((c) => `${c.function.name}(${c.function.arguments})`).join(", ") || answer.text;
      process.stdout.write(`${last?.role ?? "-"}: ${textOf(last?.content).slice(0, 80)}\n  -> ${said}\n`);
    },
  });
  process.stdout.write(`model-server: base_url ${server.baseUrl}\n`);
  process.on("SIGINT", () => void server.close().then(() => process.exit(0)));
}
