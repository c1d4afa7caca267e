/**
 * The tools of `skein mcp`: each a name, a one-line description telling a coding agent when to
 * use it, a strict zod schema of its arguments, and a call of the SkeinApi. Read tools are always
 * served; write tools only when the server was started with `--allow-writes` (server.ts leaves
 * them out of tools/list otherwise, so an agent never sees what it may not do).
 *
 * A tool answers its result as JSON text, and as `structuredContent` (always an object). A
 * failure, the library's or the API's error, is thrown: the SDK answers it as a tool error
 * (`isError: true`) whose text is the error's message, which says what is wrong and what to do.
 */
import type { ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { RUN_STATUSES } from "../core/states.js";
import type { Json } from "../core/types.js";
import type { SkeinApi } from "./skein-api.js";

const Id = z.string().min(1).max(200);
const RunId = Id.describe("the run's full run_id (list_runs shows it)");
const Key = Id.describe("the same key again is answered as the first time, and acts once");

/** What a tool returns: `content` for any client, `structuredContent` for those that read it. */
export interface ToolResult {
  [key: string]: unknown;
  content: { type: "text"; text: string }[];
  structuredContent: Record<string, unknown>;
}

export interface SkeinTool<S extends z.ZodObject = z.ZodObject> {
  name: string;
  description: string;
  /** Writes need `--allow-writes`. */
  writes: boolean;
  annotations: ToolAnnotations;
  input: S;
  call(api: SkeinApi, args: z.output<S>): Promise<ToolResult>;
}

function tool<S extends z.ZodObject>(t: SkeinTool<S>): SkeinTool {
  return t as unknown as SkeinTool;
}

function result(value: Record<string, unknown>): ToolResult {
  return { content: [{ type: "text", text: JSON.stringify(value, null, 2) }], structuredContent: value };
}

const READ: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };
const WRITE: ToolAnnotations = {
  readOnlyHint: false,
  destructiveHint: false,
  idempotentHint: false,
  openWorldHint: false,
};

export const TOOLS: readonly SkeinTool[] = [
  tool({
    name: "list_workflows",
    description:
      "List the registered workflows with their latest versions: use it to find a workflow_id for list_runs or start_run.",
    writes: false,
    annotations: READ,
    input: z.object({}).strict(),
    call: async (api) => result({ workflows: await api.listWorkflows() }),
  }),
  tool({
    name: "list_runs",
    description:
      "List runs newest first, filtered by workflow, status, paused or text in their input or output: use it to find a run's id, the runs that failed, or those paused waiting for an operator.",
    writes: false,
    annotations: READ,
    input: z
      .object({
        workflow_id: Id.optional().describe("only runs of this workflow"),
        status: z.enum(RUN_STATUSES).optional().describe("only runs with this status"),
        query: z
          .string()
          .min(3)
          .max(200)
          .optional()
          .describe("only runs whose input or output contains this text, in any case (3 to 200 characters)"),
        id_contains: Id.optional().describe("only runs whose run_id contains this (e.g. the end of an id)"),
        paused: z
          .boolean()
          .optional()
          .describe("only paused runs (true: no attempt of theirs starts until resumed), or only runs not paused"),
        limit: z.number().int().min(1).max(100).default(20).describe("at most this many runs (default 20)"),
        cursor: z.string().min(1).max(1000).optional().describe("next_cursor of the previous page"),
      })
      .strict(),
    call: async (api, args) => {
      const page = await api.listRuns({
        limit: args.limit,
        ...(args.workflow_id === undefined ? {} : { workflow_id: args.workflow_id }),
        ...(args.status === undefined ? {} : { status: args.status }),
        ...(args.query === undefined ? {} : { q: args.query }),
        ...(args.id_contains === undefined ? {} : { id_contains: args.id_contains }),
        ...(args.paused === undefined ? {} : { paused: args.paused }),
        ...(args.cursor === undefined ? {} : { cursor: args.cursor }),
      });
      return result({ ...page });
    },
  }),
  tool({
    name: "get_run",
    description:
      "Read one run: its status, input, output and error, each node's current state and error, the failed nodes' errors, and its graph as a Mermaid flowchart: use it to see where and why a run waits or failed.",
    writes: false,
    annotations: READ,
    input: z.object({ run_id: RunId }).strict(),
    call: async (api, { run_id }) => {
      const [run, graph] = await Promise.all([api.getRun(run_id), api.graph(run_id)]);
      const failed_nodes = run.nodes
        .filter((n) => n.state === "FAILED")
        .map((n) => ({
          node_id: n.node_id,
          visit: n.visit,
          agent_type: n.agent_type,
          error: n.error,
          reason: n.reason,
        }));
      return result({ run, failed_nodes, graph });
    },
  }),
  tool({
    name: "get_events",
    description:
      "Read a run's history, oldest first, a page at a time (each attempt started, failed, retried; reviews, events, the end): use it to see what happened in order.",
    writes: false,
    annotations: READ,
    input: z
      .object({
        run_id: RunId,
        after_seq: z.number().int().min(0).optional().describe("next_after_seq of the previous page"),
        limit: z.number().int().min(1).max(1000).default(100).describe("at most this many events (default 100)"),
      })
      .strict(),
    call: async (api, { run_id, after_seq, limit }) =>
      result({ ...(await api.listEvents(run_id, { limit, ...(after_seq === undefined ? {} : { after_seq }) })) }),
  }),
  tool({
    name: "list_reviews",
    description:
      "List the human_review nodes waiting for a person's decision, oldest first, with their title, instructions, data and assignees: use it before decide_review.",
    writes: false,
    annotations: READ,
    input: z.object({ run_id: RunId.optional().describe("only this run's reviews") }).strict(),
    call: async (api, { run_id }) =>
      result({ reviews: await api.listReviews(run_id === undefined ? undefined : [run_id]) }),
  }),
  tool({
    name: "start_run",
    description:
      "Start a run of a registered workflow with an input; an engine (skein engine or skein serve) runs it. Answers the run, with its run_id for get_run.",
    writes: true,
    annotations: WRITE,
    input: z
      .object({
        workflow_id: Id.describe("a registered workflow (list_workflows)"),
        input: z
          .unknown()
          .optional()
          .describe("the run's input (default {}), checked against the workflow's input_schema"),
        idempotency_key: Key.optional(),
      })
      .strict(),
    call: async (api, { workflow_id, input, idempotency_key }) =>
      result({
        ...(await api.startRun(workflow_id, {
          ...(input === undefined ? {} : { input }),
          ...(idempotency_key === undefined ? {} : { idempotency_key }),
        })),
      }),
  }),
  tool({
    name: "decide_review",
    description:
      "Approve or reject a human_review node waiting for a decision (list_reviews shows them): approve lets the run go on, reject fails the node.",
    writes: true,
    annotations: WRITE,
    input: z
      .object({
        run_id: RunId,
        node_id: Id.describe("the human_review node"),
        decision: z.enum(["approve", "reject"]),
        by: Id.optional().describe("who decides: one of the node's assignees when it lists some"),
        comment: z.string().max(10_000).optional().describe("why, recorded with the decision"),
        output: z.unknown().optional().describe("approve only: edited output to pass on"),
        execution_id: Id.optional().describe(
          "the review round decided on (list_reviews): refused if the node moved on",
        ),
      })
      .strict(),
    call: async (api, { run_id, node_id, ...decision }) =>
      result({ ...(await api.review(run_id, node_id, withoutUndefined(decision))) }),
  }),
  tool({
    name: "send_event",
    description:
      "Send a named event to a run: its oldest wait_event node waiting for that name receives it (the payload becomes its output), else the run's inbox keeps it.",
    writes: true,
    annotations: WRITE,
    input: z
      .object({
        run_id: RunId,
        name: Id.describe("the event's name (a wait_event node's payload.event)"),
        payload: z.unknown().optional().describe("the event's payload (default null)"),
        idempotency_key: Key.optional(),
      })
      .strict(),
    call: async (api, { run_id, name, payload, idempotency_key }) =>
      result({
        ...(await api.sendEvent(run_id, name, (payload ?? null) as Json, {
          ...(idempotency_key === undefined ? {} : { idempotency_key }),
        })),
      }),
  }),
  tool({
    name: "cancel_run",
    description:
      "Cancel a running run: its running nodes are cancelled and pending ones skipped; with compensate, what it did is undone first.",
    writes: true,
    annotations: { ...WRITE, destructiveHint: true },
    input: z
      .object({
        run_id: RunId,
        reason: z.string().max(1000).optional().describe("why, recorded as the run's error"),
        compensate: z.boolean().optional().describe("undo what the run did first (COMPENSATING, then CANCELLED)"),
      })
      .strict(),
    call: async (api, { run_id, ...options }) =>
      result({ ...(await api.cancelRun(run_id, withoutUndefined(options))) }),
  }),
  tool({
    name: "retry_run",
    description:
      "Run a FAILED or CANCELLED run again from where it stopped (what failed and everything downstream; other successes are kept): use it once the cause of the failure is fixed.",
    writes: true,
    annotations: WRITE,
    input: z
      .object({
        run_id: RunId,
        from: Id.optional().describe("also run this earlier node again, with everything downstream"),
        force: z.boolean().optional().describe("retry a run that needs attention (a compensation failed for good)"),
        fresh_steps: z.boolean().optional().describe("the new visits start without the failed visits' durable steps"),
      })
      .strict(),
    call: async (api, { run_id, ...options }) => result({ ...(await api.retryRun(run_id, withoutUndefined(options))) }),
  }),
];

/** The object without its undefined members (the engine's options and the API's strict bodies want them absent). */
function withoutUndefined<T extends Record<string, unknown>>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
