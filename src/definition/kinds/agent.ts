/**
 * `agent` (DESIGN §14.2): a tool-calling loop. A model asks for tools, the engine runs them and
 * gives their results back, until the model answers. This module is the payload's rules only
 * (pure); the loop itself is src/calls/agent/, wired in engine-parts as the kind's in-process
 * agent, each model turn and each tool call a durable step of the visit (§14.1).
 *
 * Decisions where DESIGN is silent:
 * - A tool's `agent_type` names an agent: the loop calls it in its process when the engine runs
 *   one of that type (a handler, `http`, `llm`), with the model's arguments as its payload; else
 *   each call is a child run of one node of that agent, which an external worker claims. A tool
 *   whose `agent_type` is `workflow` runs the workflow its payload names (`{ workflow_id,
 *   version?, input }`, templates seeing `args`), a child run per call. Either child run's key
 *   is made from the call's, so a call run again after a crash waits for the same run.
 * - A tool's `retry_count` (default 0: the model sees the error and decides) retries a failed
 *   call at once; `timeout` (seconds) aborts one call.
 * - A tool's (or an MCP tool set's) `approval` is `{ assignees?, timeout? }`: assignees as a
 *   human_review's (a list of names; absent: any reviewer), timeout in seconds (default a day,
 *   at most 30 days). Calls wait one at a time (core/kinds/agent.ts).
 * - A tool's `compensation` is `{ agent_type }`: when the run's ending compensates the visit, the
 *   engine calls that agent once per successful call of the tool, newest first, with
 *   `{ tool, args, result }` as its payload and `<call key>:compensate` as its execution_id; and
 *   once per call that was running when the visit ended, with `result: null, in_flight: true`.
 * - `thread` (1 to 128 characters once resolved) is the node's `concurrency` key with limit 1
 *   when the node gives none: one visit of a thread at a time per workflow node, the others wait
 *   ready. A thread shared by two nodes or workflows is not serialised across them.
 */

import { createRequire } from "node:module";
import type { Ajv } from "ajv";
import type { Problem } from "../../errors.js";
import type { Json } from "../../json-text.js";
import { assigneesProblem } from "../assignees.js";
import { compilePayload } from "../expressions.js";
import type { NodeDefinition } from "../schema.js";
import { nearest } from "../suggest.js";
import type { KindRules } from "./kind.js";
import { isObject, payloadProblems as llmProblems, show } from "./llm.js";

/** The model settings an agent payload shares with an `llm` node's. */
const MODEL_FIELDS = ["model", "provider", "temperature", "max_tokens", "response_format"] as const;
const FIELDS = [
  ...MODEL_FIELDS,
  "instructions",
  "input",
  "tools",
  "max_turns",
  "parallel_tool_calls",
  "tool_errors",
  "thread",
] as const;
const TOOL_FIELDS = [
  "name",
  "description",
  "parameters",
  "agent_type",
  "payload",
  "retry_count",
  "timeout",
  "compensation",
  "approval",
] as const;
const MCP_FIELDS = ["mcp", "tools", "approval"] as const;

export const DEFAULT_MAX_TURNS = 10;
/** The most model calls one visit may make: a loop past it is a bug, not a plan. */
export const MAX_TURNS_LIMIT = 1000;
/** A tool call's longest timeout, seconds (a day: longer work belongs in a node of its own). */
const MAX_TOOL_TIMEOUT_S = 86_400;
/** How long a call waits for approval by default (a day), and at most (30 days), seconds. */
export const DEFAULT_APPROVAL_TIMEOUT_S = 86_400;
const MAX_APPROVAL_TIMEOUT_S = 30 * 86_400;
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** A tool that runs an agent of this engine. */
export interface AgentTool {
  name: string;
  description?: string;
  parameters?: Record<string, Json>;
  agent_type: string;
  /** Templates that see `args` (the model's arguments); absent: the arguments are the payload. */
  payload?: Json;
  retry_count?: number;
  timeout?: number;
  /** Undoes a recorded call when the run's ending compensates the visit. */
  compensation?: { agent_type: string };
  /** Each call waits for a person's decision first. */
  approval?: ToolApproval;
}

/** Who approves a tool's calls, and how long a call waits (seconds). */
export interface ToolApproval {
  assignees?: string[];
  timeout?: number;
}

/** The tools of an MCP server named in the engine's `mcp` option (all of them, or these names). */
export interface McpToolSet {
  mcp: string;
  tools?: string[];
  approval?: ToolApproval;
}

/** The payload as the loop reads it (after validation and template resolution). */
export interface AgentPayload {
  model: string;
  provider?: string;
  temperature?: number;
  max_tokens?: number;
  response_format?: Json;
  instructions?: string;
  input: string | Json[];
  tools?: (AgentTool | McpToolSet)[];
  max_turns?: number;
  parallel_tool_calls?: boolean;
  tool_errors?: "to_model" | "fail";
  thread?: string;
}

export const agent: KindRules = {
  name: "agent",
  start: "agent",
  notClaimable: "run in the engine (its built-in tool-calling loop, with the engine's providers, tools and secrets)",
  retries: true,
  // A tool's payload templates see `args`, one call at a time: the loop resolves them.
  deferred: ["tools"],
  validate(node: NodeDefinition, checks) {
    // Rules added since a document was stored do not refuse it (an agent_type "agent" of its own).
    if (checks.stored) return [];
    const problems = payloadProblems(node.payload, false).map((p) => ({
      path: `${checks.at}.${p.path}`,
      message: p.message,
    }));
    if (node.compensation !== undefined && undoesCalls(node.payload as Json)) {
      problems.push({
        path: `${checks.at}.compensation`,
        message:
          "an agent node whose tools declare compensation cannot declare its own: undo per tool call, or once for the node, not both",
      });
    }
    return problems;
  },
  undoes: (payload) => undoesCalls(payload),
  agentTypesIn(payload) {
    const tools = (payload as { tools?: unknown } | null)?.tools;
    if (!Array.isArray(tools)) return [];
    return tools.flatMap((t, i) => {
      if (!isObject(t)) return [];
      // A `workflow` tool runs a workflow, not an agent of that type.
      const named =
        typeof t.agent_type === "string" && t.agent_type !== "workflow"
          ? [{ path: `tools[${i}].agent_type`, agent_type: t.agent_type }]
          : [];
      const undo =
        isObject(t.compensation) && typeof t.compensation.agent_type === "string" ? t.compensation.agent_type : null;
      return undo === null ? named : [...named, { path: `tools[${i}].compensation.agent_type`, agent_type: undo }];
    });
  },
  checkResolved(payload) {
    const problems = payloadProblems(payload, true);
    return problems.length === 0 ? null : problems.map((p) => `${p.path} ${p.message}`).join("; ");
  },
  impliedConcurrency(node) {
    const thread = (node.payload as Record<string, unknown> | undefined)?.thread;
    return typeof thread === "string" ? { key: thread, limit: 1 } : null;
  },
};

/** Whether a tool of the payload declares `compensation`: the node's visit is then undone call by call. */
export function undoesCalls(payload: Json): boolean {
  const tools = (payload as { tools?: unknown } | null)?.tools;
  return Array.isArray(tools) && tools.some((t) => isObject(t) && "compensation" in t);
}

/** The longest thread key, in characters (it names a step: `thread:<key>`). */
export const MAX_THREAD_LENGTH = 128;

/**
 * Every problem of an agent payload, with its path from `payload`. Before templates are resolved
 * (`resolved` false), a field that is a template is left for `checkResolved`.
 */
export function payloadProblems(payload: unknown, resolved: boolean): Problem[] {
  if (!isObject(payload)) {
    return [
      { path: "payload", message: 'must be an object, e.g. { "model": "gpt-4o-mini", "input": "...", "tools": [] }' },
    ];
  }
  const p = payload;
  const later = (v: unknown) => !resolved && typeof v === "string" && v.includes("{{");
  const problems: Problem[] = [];
  const add = (path: string, message: string) => problems.push({ path: `payload${path}`, message });

  for (const key of Object.keys(p)) {
    if ((FIELDS as readonly string[]).includes(key)) continue;
    const near = nearest(key, FIELDS);
    add(
      `.${key}`,
      `is not a field of an agent payload${near ? ` (did you mean "${near}"?)` : ""}; the fields are ${FIELDS.join(", ")}`,
    );
  }
  // The model settings are an llm node's: its rules, with a placeholder prompt.
  const model: Record<string, unknown> = { prompt: "" };
  for (const field of MODEL_FIELDS) if (field in p) model[field] = p[field];
  problems.push(...llmProblems(model, resolved));

  if (p.instructions !== undefined && !later(p.instructions) && typeof p.instructions !== "string") {
    add(".instructions", `must be a string (the system message), got ${show(p.instructions)}`);
  }
  if (!("input" in p)) add(".input", 'is required: the user\'s message, e.g. "{{ input.question }}"');
  else if (!later(p.input)) {
    const ok =
      typeof p.input === "string" || (Array.isArray(p.input) && p.input.length > 0 && p.input.every(isMessage));
    if (!ok)
      add(
        ".input",
        `must be a string (one user message) or a non-empty list of { role, content }, got ${show(p.input)}`,
      );
  }
  if ("max_turns" in p && !later(p.max_turns)) {
    const m = p.max_turns;
    if (!Number.isInteger(m) || (m as number) < 1 || (m as number) > MAX_TURNS_LIMIT) {
      add(
        ".max_turns",
        `must be a whole number from 1 to ${MAX_TURNS_LIMIT} (model calls in one visit), got ${show(m)}`,
      );
    }
  }
  if ("parallel_tool_calls" in p && typeof p.parallel_tool_calls !== "boolean") {
    add(".parallel_tool_calls", `must be true or false, got ${show(p.parallel_tool_calls)}`);
  }
  if ("tool_errors" in p && p.tool_errors !== "to_model" && p.tool_errors !== "fail") {
    add(
      ".tool_errors",
      `must be "to_model" (a failed call's error goes back to the model) or "fail" (the visit fails), got ${show(p.tool_errors)}`,
    );
  }
  if ("thread" in p && !later(p.thread)) {
    const t = p.thread;
    if (typeof t !== "string" || t.length === 0 || t.length > MAX_THREAD_LENGTH) {
      add(
        ".thread",
        `must be a string of 1 to ${MAX_THREAD_LENGTH} characters (a key: "{{ input.user_id }}"), got ${show(t)}`,
      );
    }
  }
  if ("tools" in p) problems.push(...toolsProblems(p.tools));
  return problems;
}

function toolsProblems(tools: unknown): Problem[] {
  if (!Array.isArray(tools)) {
    return [
      {
        path: "payload.tools",
        message: `must be a list of tools ({ name, agent_type, ... } or { mcp }), got ${show(tools)}`,
      },
    ];
  }
  const problems: Problem[] = [];
  const names = new Map<string, number>();
  tools.forEach((t: unknown, i) => {
    const at = `payload.tools[${i}]`;
    const add = (path: string, message: string) => problems.push({ path: `${at}${path}`, message });
    if (!isObject(t)) {
      add(
        "",
        `must be a tool { name, description, parameters, agent_type } or an MCP server's tools { mcp }, got ${show(t)}`,
      );
      return;
    }
    if ("mcp" in t) {
      unknownFields(t, MCP_FIELDS, "an MCP tool set", add);
      if (typeof t.mcp !== "string" || t.mcp === "")
        add(".mcp", `must name a server of the engine's mcp option, got ${show(t.mcp)}`);
      if ("tools" in t) {
        const ok =
          Array.isArray(t.tools) && t.tools.length > 0 && t.tools.every((n) => typeof n === "string" && n !== "");
        if (!ok) add(".tools", `must be a non-empty list of the server's tool names, got ${show(t.tools)}`);
      }
      if ("approval" in t) approvalProblems(t.approval, add);
      return;
    }
    unknownFields(t, TOOL_FIELDS, "a tool", add);
    if (typeof t.name !== "string" || !TOOL_NAME.test(t.name)) {
      add(".name", `must be 1 to 64 letters, digits, _ or - (the name the model calls), got ${show(t.name)}`);
    } else {
      const first = names.get(t.name);
      if (first !== undefined)
        add(".name", `"${t.name}" is the name of payload.tools[${first}] too: tool names are unique`);
      else names.set(t.name, i);
    }
    if ("description" in t && typeof t.description !== "string") {
      add(".description", `must be a string (what the tool does, for the model), got ${show(t.description)}`);
    }
    if (typeof t.agent_type !== "string" || t.agent_type === "") {
      add(
        ".agent_type",
        `is required: the agent that runs a call (an agent of this engine, or http), got ${show(t.agent_type)}`,
      );
    }
    if ("parameters" in t) {
      const problem = schemaProblem(t.parameters);
      if (problem) add(".parameters", problem);
    }
    if (t.agent_type === "workflow") {
      const p = t.payload;
      const named = isObject(p) && typeof p.workflow_id === "string" && p.workflow_id !== "";
      if (!named) {
        add(
          ".payload",
          `a workflow tool's payload names the workflow each call runs: { "workflow_id": "<id>", "input": "{{ args }}" }, got ${show(p)}`,
        );
      }
    }
    if ("payload" in t) {
      // Its templates see `args`; a secret goes to the tool's agent, not through the model's loop.
      const compiled = compilePayload(t.payload, `${at}.payload`, {
        secretsRefused:
          "a tool's payload cannot read secrets; give them to the tool's agent (defineAgent({ secrets }))",
      });
      problems.push(...compiled.problems);
    }
    if (
      "retry_count" in t &&
      !(Number.isInteger(t.retry_count) && (t.retry_count as number) >= 0 && (t.retry_count as number) <= 10)
    ) {
      add(".retry_count", `must be a whole number from 0 to 10, got ${show(t.retry_count)}`);
    }
    if ("compensation" in t) {
      const c = t.compensation;
      const ok = isObject(c) && typeof c.agent_type === "string" && c.agent_type !== "" && Object.keys(c).length === 1;
      if (!ok) add(".compensation", `must be { "agent_type": "<the agent that undoes a call>" }, got ${show(c)}`);
    }
    if ("timeout" in t && !(typeof t.timeout === "number" && t.timeout > 0 && t.timeout <= MAX_TOOL_TIMEOUT_S)) {
      add(".timeout", `must be a number of seconds above 0, at most ${MAX_TOOL_TIMEOUT_S}, got ${show(t.timeout)}`);
    }
    if ("approval" in t) approvalProblems(t.approval, add);
  });
  return problems;
}

function approvalProblems(approval: unknown, add: (path: string, message: string) => void): void {
  if (!isObject(approval)) {
    add(".approval", `must be { "assignees"?: [names], "timeout"?: seconds }, got ${show(approval)}`);
    return;
  }
  for (const key of Object.keys(approval)) {
    if (key !== "assignees" && key !== "timeout") {
      add(`.approval.${key}`, "is not a field of a tool's approval; the fields are assignees, timeout");
    }
  }
  if ("assignees" in approval) {
    const problem = assigneesProblem(approval.assignees);
    if (problem) add(".approval.assignees", problem);
  }
  const t = approval.timeout;
  if ("timeout" in approval && !(typeof t === "number" && t > 0 && t <= MAX_APPROVAL_TIMEOUT_S)) {
    add(
      ".approval.timeout",
      `must be a number of seconds above 0, at most ${MAX_APPROVAL_TIMEOUT_S} (30 days), got ${show(t)}`,
    );
  }
}

/** Fields a tool may not have, each with a "did you mean" when one is near. */
function unknownFields(
  t: Record<string, unknown>,
  known: readonly string[],
  what: string,
  add: (path: string, message: string) => void,
): void {
  for (const key of Object.keys(t)) {
    if (known.includes(key)) continue;
    const near = nearest(key, known);
    add(
      `.${key}`,
      `is not a field of ${what}${near ? ` (did you mean "${near}"?)` : ""}; the fields are ${known.join(", ")}`,
    );
  }
}

let ajv: Ajv | null = null;

/**
 * The JSON Schema checker of tools' arguments: one, made on first use. Required then, not
 * imported with the module: ajv costs start-up time a workflow without agent tools should not pay.
 */
export function toolSchemas(): Ajv {
  if (!ajv) {
    const { Ajv: AjvClass } = createRequire(import.meta.url)("ajv") as typeof import("ajv");
    ajv = new AjvClass({ allErrors: true, strict: false });
  }
  return ajv;
}

/** Why `parameters` is not a JSON Schema of an object (what the model's arguments are), or null. */
function schemaProblem(schema: unknown): string | null {
  if (!isObject(schema))
    return `must be a JSON Schema object, e.g. { "type": "object", "properties": { ... } }, got ${show(schema)}`;
  if (schema.type !== undefined && schema.type !== "object") {
    return `must describe an object (the model's arguments are one): "type" is ${show(schema.type)}, not "object"`;
  }
  const checker = toolSchemas();
  if (!checker.validateSchema(schema)) return `is not a valid JSON Schema: ${checker.errorsText(checker.errors)}`;
  return null;
}

function isMessage(m: unknown): boolean {
  return isObject(m) && typeof m.role === "string" && (typeof m.content === "string" || Array.isArray(m.content));
}
