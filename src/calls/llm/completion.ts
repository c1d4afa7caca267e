/**
 * An OpenAI chat completion read from the provider's answer: a stream of SSE chunks (parsed by
 * eventsource-parser) whose content and tool-call fragments are put together, or one JSON
 * completion from a provider that does not stream.
 *
 * Every read is bounded (DESIGN §13.1), so a provider cannot grow the engine's memory or hold an
 * attempt with an answer that never ends; past a bound the body is cancelled (the connection
 * closed) and the attempt fails `invalid_output`, not retried (see `answerLimits`).
 */
import { createParser, type EventSourceMessage } from "eventsource-parser";
import type { Json } from "../../core/types.js";
import { RetryableError } from "../../errors.js";
import { ResponseTooLargeError, readUpTo } from "../http.js";

/** A tool call as the model made it (OpenAI's shape, so it may go back into `messages` as is). */
export interface ToolCall {
  id: string;
  type: string;
  function: { name: string; arguments: string };
  /** `function.arguments` parsed, when it is JSON; else null. */
  parsed_arguments: Json;
}

export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface Completion {
  content: string;
  tool_calls: ToolCall[];
  usage: TokenUsage | null;
  finish_reason: string | null;
  model: string | null;
}

export interface ReadOptions {
  /** Who answers, for messages: `provider "default"`. */
  who: string;
  /** The most bytes of content and tool-call arguments accepted (the engine's maxPayloadBytes). */
  maxBytes: number;
  /** Called with each chunk's new text (a delta: the text so far is all of them joined). */
  onContent(delta: string): void;
}

interface ChunkChoice {
  delta?: {
    content?: string | null;
    tool_calls?: {
      index?: number;
      id?: string;
      type?: string;
      function?: { name?: string; arguments?: string };
    }[];
  };
  finish_reason?: string | null;
}

interface Chunk {
  model?: string;
  choices?: ChunkChoice[];
  usage?: Partial<TokenUsage> | null;
  error?: { message?: string } | string;
}

/** The most bytes read of one answer, past which the attempt fails `invalid_output`. */
export interface AnswerLimits {
  /** One SSE event (in characters), or a whole JSON completion (in bytes). */
  event: number;
  /** A whole stream, its framing included. */
  stream: number;
}

/** Room for a completion's envelope (id, model, usage, finish_reason) around its content. */
const ENVELOPE_BYTES = 64 * 1024;
/**
 * A stream carries each token in an envelope of ~200 bytes (`data: {"id":...,"choices":[...]}`),
 * so a stream whose content fits maxPayloadBytes is up to ~60 (English) to ~250 (one-byte tokens)
 * times longer. Nothing of it is kept but the content: this bound ends an endless stream.
 */
const STREAM_FACTOR = 256;

/**
 * The bounds of an answer whose content may be `maxBytes`: one event or JSON completion holds the
 * content JSON-escaped (at most twice as long, as in `\"`-heavy JSON content) and its envelope.
 */
export function answerLimits(maxBytes: number): AnswerLimits {
  return { event: 2 * maxBytes + ENVELOPE_BYTES, stream: STREAM_FACTOR * maxBytes + ENVELOPE_BYTES };
}

const ASK_LESS = "ask for less (max_tokens) or raise maxPayloadBytes";

/** Reads a streamed completion; a stream that ends before its finish_reason or `[DONE]` is a retryable failure. */
export async function readStream(body: AsyncIterable<Uint8Array>, o: ReadOptions): Promise<Completion> {
  const limits = answerLimits(o.maxBytes);
  const acc = new Accumulator(o);
  let done = false;
  let failure: Error | null = null;
  const parser = createParser({
    // A line or an event that never ends is held by the parser: bounded here, not by the stream's end.
    maxBufferSize: limits.event,
    onError(error) {
      if (error.type !== "max-buffer-size-exceeded" || failure) return;
      failure = new ResponseTooLargeError(
        `one event of the stream from ${o.who} passed ${limits.event} characters (2 × maxPayloadBytes + 64 KiB); ${ASK_LESS}`,
      );
    },
    onEvent(event: EventSourceMessage) {
      if (failure || done) return;
      if (event.data === "[DONE]") {
        done = true;
        return;
      }
      try {
        acc.add(parseChunk(event.data, o.who));
      } catch (e) {
        failure = e as Error;
      }
    },
  });
  const decoder = new TextDecoder();
  let total = 0;
  try {
    // Leaving the loop early closes the connection: the provider sends nothing more.
    for await (const value of body) {
      total += value.byteLength;
      if (total > limits.stream) {
        failure = new ResponseTooLargeError(
          `the stream from ${o.who} passed ${limits.stream} bytes (256 × maxPayloadBytes + 64 KiB) before its end; ${ASK_LESS}`,
        );
        break;
      }
      parser.feed(decoder.decode(value, { stream: true }));
      if (failure || done) break;
    }
  } catch (e) {
    if (failure) throw failure;
    throw new RetryableError(`the stream from ${o.who} broke off: ${causeOf(e)}`, { cause: e });
  }
  if (failure) throw failure;
  const completion = acc.result();
  if (!done && completion.finish_reason === null) {
    throw new RetryableError(
      `the stream from ${o.who} ended before the completion did (no finish_reason, no [DONE]) after ${completion.content.length} characters`,
    );
  }
  return completion;
}

/** The whole body of a completion sent as one JSON document, refused past `answerLimits().event` bytes. */
export async function readJsonBody(body: AsyncIterable<Uint8Array>, o: ReadOptions): Promise<string> {
  const limit = answerLimits(o.maxBytes).event;
  const bytes = await readUpTo(body, limit + 1);
  if (bytes.length > limit) {
    throw new ResponseTooLargeError(
      `the completion from ${o.who} passed ${limit} bytes (2 × maxPayloadBytes + 64 KiB); ${ASK_LESS}`,
    );
  }
  return new TextDecoder().decode(bytes);
}

/** A completion the provider sent as one JSON document (`stream` ignored). */
export function readJson(text: string, o: ReadOptions): Completion {
  let doc: {
    model?: string;
    choices?: { message?: { content?: string | null; tool_calls?: ToolCall[] }; finish_reason?: string | null }[];
    usage?: Partial<TokenUsage> | null;
  };
  try {
    doc = JSON.parse(text);
  } catch {
    throw new RetryableError(`${o.who} answered with JSON that does not parse: ${text.slice(0, 200)}`);
  }
  const error = (doc as Chunk).error;
  if (error !== undefined) throw new RetryableError(`${o.who} answered with an error: ${errorText(error)}`);
  const choice = doc.choices?.[0];
  const acc = new Accumulator(o);
  acc.add({
    ...(doc.model === undefined ? {} : { model: doc.model }),
    choices: [
      {
        delta: {
          content: choice?.message?.content ?? null,
          tool_calls: (choice?.message?.tool_calls ?? []).map((c, index) => ({ index, ...c })),
        },
        finish_reason: choice?.finish_reason ?? null,
      },
    ],
    usage: doc.usage ?? null,
  });
  return acc.result();
}

function parseChunk(data: string, who: string): Chunk {
  let chunk: Chunk;
  try {
    chunk = JSON.parse(data) as Chunk;
  } catch {
    throw new RetryableError(`${who} sent a stream chunk that is not JSON: ${data.slice(0, 200)}`);
  }
  if (chunk.error !== undefined) {
    const message =
      typeof chunk.error === "string" ? chunk.error : (chunk.error.message ?? JSON.stringify(chunk.error));
    throw new RetryableError(`${who} sent an error in the stream: ${message}`);
  }
  return chunk;
}

/** Content and tool-call fragments put together, within the size limit. */
class Accumulator {
  private content = "";
  private readonly calls: { id: string; type: string; name: string; arguments: string }[] = [];
  private usage: TokenUsage | null = null;
  private finish: string | null = null;
  private model: string | null = null;
  private bytes = 0;

  constructor(private readonly o: ReadOptions) {}

  add(chunk: Chunk): void {
    if (typeof chunk.model === "string" && chunk.model !== "") this.model = chunk.model;
    if (chunk.usage) {
      const prompt = count(chunk.usage.prompt_tokens);
      const completion = count(chunk.usage.completion_tokens);
      this.usage = {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: count(chunk.usage.total_tokens) || prompt + completion,
      };
    }
    const choice = chunk.choices?.[0];
    if (!choice) return;
    const text = choice.delta?.content;
    if (typeof text === "string" && text !== "") {
      this.grow(text);
      this.content += text;
      this.o.onContent(text);
    }
    for (const fragment of choice.delta?.tool_calls ?? []) {
      const index = fragment.index ?? this.calls.length;
      const call = (this.calls[index] ??= { id: "", type: "function", name: "", arguments: "" });
      if (fragment.id) call.id = fragment.id;
      if (fragment.type) call.type = fragment.type;
      if (fragment.function?.name) call.name = fragment.function.name;
      if (fragment.function?.arguments) {
        this.grow(fragment.function.arguments);
        call.arguments += fragment.function.arguments;
      }
    }
    if (choice.finish_reason) this.finish = choice.finish_reason;
  }

  result(): Completion {
    return {
      content: this.content,
      tool_calls: this.calls
        .filter((c) => c !== undefined)
        .map((c) => ({
          id: c.id,
          type: c.type,
          function: { name: c.name, arguments: c.arguments },
          parsed_arguments: parseOrNull(c.arguments),
        })),
      usage: this.usage,
      finish_reason: this.finish,
      model: this.model,
    };
  }

  private grow(text: string): void {
    this.bytes += Buffer.byteLength(text);
    if (this.bytes > this.o.maxBytes) {
      throw new ResponseTooLargeError(
        `the completion from ${this.o.who} passed ${this.o.maxBytes} bytes (maxPayloadBytes), the largest output a node may have; ${ASK_LESS}`,
      );
    }
  }
}

function errorText(error: NonNullable<Chunk["error"]>): string {
  return typeof error === "string" ? error : (error.message ?? JSON.stringify(error));
}

function count(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0;
}

function parseOrNull(text: string): Json {
  try {
    return JSON.parse(text) as Json;
  } catch {
    return null;
  }
}

/** What a network error says (undici hides the socket's error in `cause`). */
export function causeOf(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const cause = e.cause instanceof Error ? `: ${e.cause.message}` : "";
  return `${e.message}${cause}`;
}
