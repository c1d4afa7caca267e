/**
 * defineAgent and getRun<O>/waitForRun<O> as a user writes them, type-checked by types.test.ts
 * under --strict; the `@ts-expect-error` lines are the mistakes these types refuse.
 */
import { z } from "zod";
import { createEngine, defineAgent, type Engine, type Json, type RunWithNodes, type Task } from "../../src/index.js";

// The generic form: the payload is typed without a cast, the output is checked.
export const collector = defineAgent<{ platform: string }, { items: string[] }>(async (task) => {
  const platform: string = task.payload.platform;
  return { items: [platform] };
});

// A wrong output is refused.
export const wrongOutput = defineAgent<{ platform: string }, { items: string[] }>(
  // @ts-expect-error items must be a list of strings
  async () => ({ items: [1] }),
);

// A payload field the type does not have is refused.
export const wrongField = defineAgent<{ platform: string }, { ok: boolean }>((task) => {
  // @ts-expect-error the payload has no field "platfrom"
  task.payload.platfrom;
  return { ok: true };
});

// route() is accepted beside the output type, sync or async.
export const router = defineAgent<{ threshold: number }, { score: number }>((task) =>
  task.payload.threshold > 1 ? task.route("publish", { score: 2 }) : { score: 1 },
);

// The run input is typed too (the third parameter).
export const withInput = defineAgent<Json, { topic: string }, { topic: string }>(async (task) => ({
  topic: task.input.topic,
}));

// The schema form infers payload, input and output from the schemas.
export const checked = defineAgent(
  {
    payload: z.object({ platform: z.string(), limit: z.number().default(3) }),
    input: z.object({ topic: z.string() }),
    output: z.object({ items: z.array(z.string()) }),
  },
  async (task) => {
    const limit: number = task.payload.limit; // the schema's output: its default applied
    const topic: string = task.input.topic;
    return { items: [task.payload.platform, topic].slice(0, limit) };
  },
);

// The schema form refuses a return value its output schema does not describe.
export const checkedWrong = defineAgent(
  { output: z.object({ ok: z.boolean() }) },
  // @ts-expect-error ok is a boolean
  async () => ({ ok: "yes" }),
);

// Without an output schema any value may be returned; without a payload schema it is Json.
export const payloadOnly = defineAgent({ payload: z.object({ n: z.number() }) }, (task) => task.payload.n * 2);
export const outputOnly = defineAgent({ output: z.string() }, (task: Task) => JSON.stringify(task.payload));

// createEngine's agents take defineAgent's results beside plain handlers (strictFunctionTypes).
export async function engineWithAgents(): Promise<Engine> {
  return createEngine({
    database: "sqlite::memory:",
    agents: { collector, router, checked, payloadOnly, plain: async (task) => ({ echo: task.payload }) },
  });
}

// getRun<O> and waitForRun<O>: the output is typed as the caller says (null until it succeeds).
export async function typedOutputs(engine: Engine, runId: string): Promise<string> {
  const done = await engine.waitForRun<{ summary: string }>(runId);
  const got: RunWithNodes<{ summary: string }> = await engine.getRun<{ summary: string }>(runId);
  // @ts-expect-error output may be null (a run that did not succeed)
  done.output.summary;
  // @ts-expect-error the output type has no field "sumary"
  got.output?.sumary;
  const plain = await engine.getRun(runId);
  const json: Json | null = plain.output; // default: Json
  return `${done.output?.summary ?? ""}${got.output?.summary ?? ""}${JSON.stringify(json)}`;
}
