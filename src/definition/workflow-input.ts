/**
 * The workflow format as a TypeScript type, for definitions written in code (`defineWorkflow`).
 *
 * Everything but the built-in kinds' payloads is derived from the zod schema (`z.input`), so a
 * field added to the schema appears here without an edit. The schema types every payload as a
 * free record (its kinds check it, definition/kinds/), so the built-in kinds' payloads are spelt out
 * below, as their `validate` and `checkResolved` accept them; test/types/ type-checks them
 * against the schema and the kinds (a literal that compiles here is accepted at run time).
 * A string field of a payload may be a `"{{ expr }}"` template wherever the kind resolves it
 * before checking; `Template` marks those.
 */
import type { z } from "zod";
import type { NodeSchema, WorkflowSchema } from "./schema.js";

/** A whole-value JSONata template, `"{{ expr }}"`, resolved when the visit becomes ready. */
export type Template = `${string}{{${string}}}${string}`;

/** Fields every node has, whatever its kind (from the schema). */
export type NodeCommonInput = Omit<z.input<typeof NodeSchema>, "agent_type" | "payload">;

/** What runs per item of a `map`: one agent, or a child workflow. */
export type MapEachInput =
  | {
      /** The agent each item runs (not `map`); its payload's templates see `item` and `index`. */
      agent_type: string;
      payload?: Record<string, unknown>;
      /** The agent that undoes one item when the run fails. */
      compensation?: { agent_type: string; payload?: Record<string, unknown> };
    }
  | {
      /** The workflow each item runs as a child run; its input's templates see `item` and `index`. */
      workflow_id: string;
      /** A registered version; default the latest when the item starts. */
      version?: number | null;
      input?: unknown;
    };

/** The payloads of the built-in kinds, by agent_type (DESIGN §11; definition/kinds/). */
/** Who approves an agent tool's calls, and how long a call waits (docs/agent-node.md#approvals). */
export interface ToolApproval {
  /** Who may decide (a list of names). @defaultValue any reviewer */
  assignees?: string[];
  /** Seconds a call waits; then the model hears it was not approved. @defaultValue 86400 */
  timeout?: number;
}

export interface BuiltinPayloads {
  /** Collects `{ <source>: output }` of its succeeded sources. */
  aggregator: {
    /** Node ids, each also in depends_on. @defaultValue every dependency */
    sources?: string[];
  };
  /** One HTTP request per attempt (DESIGN §12); output `{ status, headers, body }`. */
  http: {
    /** @defaultValue "GET" */
    method?: "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS" | Template;
    /** An absolute http:// or https:// URL. */
    url: string;
    /** Header values may hold templates, `{{ secrets.NAME }}` among them. `Idempotency-Key` defaults to the execution_id. */
    headers?: Record<string, string> | Template;
    /** Appended to the url's query; a list repeats the name. */
    query?: Record<string, string | number | boolean | (string | number | boolean)[]> | Template;
    /** A string is sent as it is (text/plain unless a content-type header says otherwise), other JSON as JSON. */
    body?: unknown;
    /** Abort the request after this many milliseconds (a retryable failure). @defaultValue the node's timeout */
    timeout_ms?: number | Template;
    /** Statuses (200) or ranges ("200-299", "2xx") that succeed. @defaultValue ["2xx"] */
    ok_status?: (number | string)[] | Template;
    /** Redirects followed, 0 to 10 (0: a 3xx is the response). @defaultValue 5 */
    max_redirects?: number | Template;
  };
  /** Waits for a person's decision. */
  human_review: {
    /** Who may decide: a non-empty list of names (or one template giving one). Absent: any reviewer. */
    assignees?: string[] | Template;
    title?: unknown;
    instructions?: unknown;
    [field: string]: unknown;
  };
  /**
   * An OpenAI-compatible chat completion (docs/llm.md): streamed, its text as `node.progress`;
   * output `{ content, parsed, tool_calls, usage, finish_reason, model }`.
   */
  llm: {
    /** The provider's model name, e.g. `"gpt-4o-mini"`. */
    model: string;
    /** The conversation; or give `prompt`. */
    messages?:
      | { role: "system" | "developer" | "user" | "assistant" | "tool"; content?: unknown; [field: string]: unknown }[]
      | Template;
    /** One user message (instead of `messages`). */
    prompt?: string;
    /** 0..2. @defaultValue the provider's */
    temperature?: number | Template;
    max_tokens?: number | Template;
    /** `json_schema` or `json_object`: the content is parsed into `output.parsed` (and checked against the schema). */
    response_format?:
      | { type: "text" }
      | { type: "json_object" }
      | { type: "json_schema"; json_schema: { name: string; schema: Record<string, unknown>; strict?: boolean } };
    /** OpenAI tool definitions: `{ type: "function", function: { name, description?, parameters? } }`. */
    tools?: {
      type: "function";
      function: { name: string; description?: string; parameters?: Record<string, unknown> };
    }[];
    tool_choice?: "auto" | "none" | "required" | { type: "function"; function: { name: string } };
    /** A name among the engine's `llm.providers`. @defaultValue `"default"` */
    provider?: string;
  };
  /**
   * A tool-calling loop (docs/agent-node.md): the model asks for tools, the engine runs them, until
   * it answers; each model turn and each tool call is a durable step. Output
   * `{ content, parsed, finish_reason, turns, tool_calls, usage }`.
   */
  agent: {
    /** The provider's model name, e.g. `"gpt-4o-mini"`. */
    model: string;
    /** A name among the engine's `llm.providers`. @defaultValue `"default"` */
    provider?: string;
    temperature?: number | Template;
    max_tokens?: number | Template;
    response_format?:
      | { type: "text" }
      | { type: "json_object" }
      | { type: "json_schema"; json_schema: { name: string; schema: Record<string, unknown>; strict?: boolean } };
    /** The system message. */
    instructions?: string;
    /** The user's message, or a list of messages. */
    input: string | { role: "system" | "developer" | "user" | "assistant" | "tool"; content?: unknown }[] | Template;
    tools?: (
      | {
          /** The name the model calls. */
          name: string;
          description?: string;
          /** JSON Schema of the arguments (an object). */
          parameters?: Record<string, unknown>;
          /** The agent that runs a call: one of this engine's, or `http`. */
          agent_type: string;
          /** The call's payload, with templates that see `args`. @defaultValue the arguments */
          payload?: unknown;
          /** @defaultValue 0 */
          retry_count?: number;
          /** Seconds. */
          timeout?: number;
          /** The agent that undoes a recorded call when the run's ending compensates. */
          compensation?: { agent_type: string };
          /** Each call waits for a person's decision first. */
          approval?: ToolApproval;
        }
      | { mcp: string; tools?: string[]; approval?: ToolApproval }
    )[];
    /** Model calls in one visit. @defaultValue 10 */
    max_turns?: number | Template;
    /** @defaultValue true */
    parallel_tool_calls?: boolean;
    /** @defaultValue "to_model" */
    tool_errors?: "to_model" | "fail";
    /** A key: the conversation continues the thread's stored messages, one visit of it at a time. */
    thread?: string;
  };
  /** Runs `each` once per element of `items`, and succeeds with the outputs in item order. */
  map: {
    /** The list to map over, or a template giving it. */
    items: unknown[] | Template;
    each: MapEachInput;
    /** Items running at once (1..10000). @defaultValue 10 */
    max_concurrency?: number | Template;
    /** The most items accepted (1..100000). @defaultValue 10000 */
    max_items?: number | Template;
    /** Failed items the map tolerates (a count); or give tolerated_failure_percent. @defaultValue 0 */
    tolerated_failures?: number | Template;
    /** Failed items the map tolerates, as a percentage (0..100). */
    tolerated_failure_percent?: number | Template;
  };
  /** Waits `seconds` from when it became ready, or `until` a time. */
  sleep:
    | { /** Seconds to wait, 0 or more. */ seconds: number | Template; until?: never }
    | { /** An ISO 8601 time with a time zone, or epoch ms. */ until: string | number; seconds?: never };
  /** Waits for an event sent to the run, or published by key. */
  wait_event: {
    /** The event's name. */
    event: string;
    /** Also take events published with this key (`publishEvent`). */
    key?: string;
    /** How long a published event by key is kept for a wait that starts later (needs key). */
    buffer_seconds?: number | Template;
  };
  /** Runs a child workflow as its attempt. */
  workflow: {
    workflow_id: string;
    /** A registered version; default the latest at start. */
    version?: number | Template | null;
    input?: unknown;
  };
}

/** The agent_types the engine itself runs. */
export type BuiltinKind = keyof BuiltinPayloads;

/** A node of a built-in kind, with that kind's payload. */
export type BuiltinNodeInput<K extends BuiltinKind = BuiltinKind> = K extends BuiltinKind
  ? NodeCommonInput & { agent_type: K } & (K extends "aggregator" | "human_review"
        ? { payload?: BuiltinPayloads[K] }
        : { payload: BuiltinPayloads[K] })
  : never;

/** A node run by an agent of yours (any agent_type that is not a built-in kind). */
export type AgentNodeInput = NodeCommonInput & {
  agent_type: string;
  /** Parameters for the agent; strings may hold templates. */
  payload?: Record<string, unknown>;
};

/** One node as written: a built-in kind's or an agent's. */
export type NodeInput = BuiltinNodeInput | AgentNodeInput;

/** A workflow definition as written (defaults optional): what `defineWorkflow` and `registerWorkflow` take. */
export type WorkflowInput = Omit<z.input<typeof WorkflowSchema>, "nodes"> & { nodes: NodeInput[] };

/**
 * A workflow whose nodes `N` are each checked against their kind (`CheckedNode`): the parameter
 * type of `defineWorkflow`, for literals. (registerWorkflow takes a plain WorkflowInput: inferring
 * `N` from a value that is not a literal, such as an element of a list of workflows, misleads.)
 */
export type CheckedWorkflow<N extends readonly NodeInput[]> = Omit<WorkflowInput, "nodes"> & {
  nodes: N & { [K in keyof N]: CheckedNode<N[K]> };
};

/**
 * The node type a written node is checked against: its kind's, by its agent_type. A payload
 * field a built-in kind does not have is refused even where every field is optional, which
 * excess-property checks alone would miss here, with a type that names it (`"secs is not a field
 * of sleep's payload"`). The written node is intersected with this (CheckedWorkflow), so the
 * field's own type meets that type: a plain string would reduce a literal value to `never`, and
 * TypeScript then reduces the whole payload to `never` (an error on every value that names
 * nothing); an object type does not. A null or undefined value meets any object as `never` too:
 * such a field is named as a property the payload lacks instead. (Written inline: helper types
 * here would be public names.)
 */
export type CheckedNode<N> = N extends { agent_type: infer A }
  ? A extends BuiltinKind
    ? BuiltinNodeInput<A> &
        (N extends { payload: infer P }
          ? {
              payload: Exclude<
                keyof P,
                // keyof of each member of the payload union (keyof of a union gives only the shared keys)
                BuiltinPayloads[A] extends infer U ? (U extends unknown ? keyof U : never) : never
              > &
                string extends infer K extends string
                ? {
                    [F in K]: P[F & keyof P] extends null | undefined
                      ? unknown
                      : { [M in `${F} is not a field of ${A}'s payload`]: true };
                  } & {
                    [F in K as P[F & keyof P] extends null | undefined
                      ? `${F} is not a field of ${A}'s payload`
                      : never]: true;
                  }
                : never;
            }
          : unknown)
    : AgentNodeInput
  : NodeInput;
