/**
 * `skein/ai-sdk` (DESIGN §14.1): `durableModelMiddleware(task)`, a Vercel AI SDK language-model
 * middleware that makes every model call of an agent a durable step. Use it with
 * `wrapLanguageModel({ model, middleware: durableModelMiddleware(task) })`.
 *
 * - The n-th model call of an attempt is `task.step("model:<n>", ...)`: a later attempt of the
 *   same visit (a retry, a recovery after a crash) that makes the same calls in the same order
 *   gets the recorded results, and the model is not asked again.
 * - A call's usage is reported to the run (`task.reportUsage`) inside the step, so only by the
 *   call that ran, never by a replay.
 * - A streamed call (`streamText`) is consumed to its end inside the step and recorded as its
 *   parts; the caller gets a stream of the recorded parts, on the first call and on a replay
 *   alike. So in this version the first call's stream is delivered once complete, not token by token.
 * - A model call that fails ends the attempt's model calls: any later call through the middleware
 *   in the same attempt throws (see `afterFailure`), so that the next attempt numbers its calls as
 *   this one did. Leave retries to Skein (`retry_count`) and give the AI SDK `maxRetries: 0`.
 *
 * `ai` is an optional peer dependency: this module imports only its types.
 */
import type { LanguageModelMiddleware } from "ai";
import type { Task } from "../agents/task.js";
import type { Usage } from "../core/types.js";

type WrapGenerate = NonNullable<LanguageModelMiddleware["wrapGenerate"]>;
type WrapStream = NonNullable<LanguageModelMiddleware["wrapStream"]>;
type GenerateResult = Awaited<ReturnType<WrapGenerate>>;
type StreamResult = Awaited<ReturnType<WrapStream>>;
type StreamPart = StreamResult["stream"] extends ReadableStream<infer P> ? P : never;
type ModelUsage = GenerateResult["usage"];
type ResponseMetadata = NonNullable<GenerateResult["response"]>;

/** A response's metadata as recorded: its timestamp as an ISO string, its body dropped. */
type RecordedResponse = Omit<ResponseMetadata, "timestamp" | "body"> & { timestamp?: string };

/** A generate call as recorded: its result as JSON, without the raw request (see `recordGenerate`). */
type RecordedGenerate = Omit<GenerateResult, "request" | "response"> & { response?: RecordedResponse };

type MetadataPart = Extract<StreamPart, { type: "response-metadata" }>;
/** A stream part as recorded: a response-metadata part's timestamp as an ISO string. */
type RecordedPart = Exclude<StreamPart, MetadataPart> | (Omit<MetadataPart, "timestamp"> & { timestamp?: string });

/** A streamed call as recorded: its parts in order, and the response's headers. */
interface RecordedStream {
  parts: RecordedPart[];
  response?: { headers?: RecordedResponse["headers"] };
}

/** What the middleware needs of a task: an in-process `Task`, or a worker's. */
export type StepTask = Pick<Task, "step" | "reportUsage" | "execution_id" | "attempt">;

/** Per task object (one attempt): how many model calls it made, and the first that failed. */
interface CallCount {
  calls: number;
  failed: { call: number; message: string } | null;
}
const counts = new WeakMap<StepTask, CallCount>();

/**
 * A language-model middleware that records each model call made through it as the durable step
 * `model:<n>` of `task` (n = 1, 2, ... over the calls of this attempt, whatever model or
 * middleware instance makes them), and reports its usage to the run once.
 * @example
 * const model = wrapLanguageModel({ model: provider("gpt-4o"), middleware: durableModelMiddleware(task) });
 * const { text } = await generateText({ model, prompt, maxRetries: 0 });
 */
export function durableModelMiddleware(task: StepTask): LanguageModelMiddleware {
  let count = counts.get(task);
  if (!count) {
    count = { calls: 0, failed: null };
    counts.set(task, count);
  }
  const state = count;

  /** Runs the next model call as its step; a failure stops the attempt's later calls. */
  const nextCall = async <T>(fn: () => Promise<T>): Promise<T> => {
    if (state.failed) throw afterFailure(task, state.failed);
    const call = ++state.calls;
    try {
      return await task.step(`model:${call}`, fn);
    } catch (e) {
      state.failed = { call, message: e instanceof Error ? e.message : String(e) };
      throw e;
    }
  };

  return {
    specificationVersion: "v3",
    wrapGenerate: async ({ doGenerate }) => {
      const recorded = await nextCall(async () => {
        const result = await doGenerate();
        reportModelUsage(task, result.usage);
        return recordGenerate(result);
      });
      return replayGenerate(recorded);
    },
    wrapStream: async ({ doStream }) => {
      const recorded = await nextCall(async () => {
        const { stream, response } = await doStream();
        const parts: RecordedPart[] = [];
        const reader = stream.getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          // An error part is a failed call: nothing is recorded, and the next attempt asks again.
          if (value.type === "error") throw value.error;
          if (value.type === "finish") reportModelUsage(task, value.usage);
          parts.push(recordPart(value));
        }
        const headers = response?.headers;
        return headers ? { parts, response: { headers } } : { parts };
      });
      return replayStream(recorded);
    },
  };
}

/** The error of a model call made after one failed in the same attempt. */
function afterFailure(task: StepTask, failed: NonNullable<CallCount["failed"]>): Error {
  return new Error(
    `skein/ai-sdk: model call ${failed.call} of attempt ${task.attempt} of ${task.execution_id} failed (${failed.message}), so this attempt makes no more model calls: the next attempt must number its calls as this one did to replay them. Let the attempt fail and Skein retry it (the node's retry_count), and give the AI SDK maxRetries: 0`,
  );
}

/** Reports a call's tokens (the model's figures; cost is the agent's to report). */
function reportModelUsage(task: StepTask, usage: ModelUsage): void {
  const figures: Usage = {};
  if (usage.inputTokens.total !== undefined) figures.tokens_in = usage.inputTokens.total;
  if (usage.outputTokens.total !== undefined) figures.tokens_out = usage.outputTokens.total;
  task.reportUsage(figures);
}

/**
 * A generate result as JSON. Dropped: `request.body` and `response.body`, the raw HTTP bodies
 * (for telemetry and debugging, not JSON for every provider, and the request repeats the prompt).
 * Converted: the response's timestamp to an ISO string, a generated file's bytes to base64 (which
 * the model interface allows in place of bytes). Undefined members are dropped by JSON.
 */
function recordGenerate(result: GenerateResult): RecordedGenerate {
  const { request: _request, response, content, ...rest } = result;
  const recorded: RecordedGenerate = { ...rest, content: content.map(fileAsBase64) };
  if (response) {
    const { body: _body, timestamp, ...metadata } = response;
    recorded.response = { ...metadata, ...(timestamp ? { timestamp: timestamp.toISOString() } : {}) };
  }
  return recorded;
}

function replayGenerate(recorded: RecordedGenerate): GenerateResult {
  const { response, ...rest } = recorded;
  if (!response) return rest;
  const { timestamp, ...metadata } = response;
  return { ...rest, response: { ...metadata, ...(timestamp ? { timestamp: new Date(timestamp) } : {}) } };
}

/**
 * A stream part as JSON: a response-metadata part's timestamp as an ISO string, a file's bytes as
 * base64, and a raw part's value (a provider's chunk, only with `includeRawChunks`) through JSON.
 */
function recordPart(part: StreamPart): RecordedPart {
  switch (part.type) {
    case "response-metadata": {
      const { timestamp, ...rest } = part;
      return timestamp ? { ...rest, timestamp: timestamp.toISOString() } : rest;
    }
    case "file":
      return fileAsBase64(part);
    case "raw":
      return { type: "raw", rawValue: JSON.parse(JSON.stringify(part.rawValue) ?? "null") };
    default:
      return part;
  }
}

function replayPart(part: RecordedPart): StreamPart {
  if (part.type !== "response-metadata") return part;
  const { timestamp, ...rest } = part;
  return timestamp ? { ...rest, timestamp: new Date(timestamp) } : rest;
}

/** A stream of the recorded parts: what the caller gets on the first call and on a replay. */
function replayStream(recorded: RecordedStream): StreamResult {
  const stream = new ReadableStream<StreamPart>({
    start(controller) {
      for (const part of recorded.parts) controller.enqueue(replayPart(part));
      controller.close();
    },
  });
  return recorded.response ? { stream, response: recorded.response } : { stream };
}

function fileAsBase64<P extends { type: string }>(part: P): P {
  if (part.type !== "file" || !("data" in part) || !(part.data instanceof Uint8Array)) return part;
  return { ...part, data: Buffer.from(part.data).toString("base64") };
}
