/**
 * `llm` (DESIGN §12): an OpenAI-compatible chat completion. This module only checks the payload
 * (pure, at validation and once its templates are resolved); the call itself, streaming, JSON
 * parsing and usage are src/calls/llm/, wired in engine-parts as the kind's in-process agent.
 */

import type { Problem } from "../../errors.js";
import type { Json } from "../../json-text.js";
import { nearest } from "../suggest.js";
import type { KindRules } from "./kind.js";

/** The provider a payload without `provider` uses. */
export const DEFAULT_PROVIDER = "default";

/** The payload's fields, as the call reads them (after validation). */
export interface LlmPayload {
  model: string;
  messages?: LlmMessage[];
  prompt?: string;
  temperature?: number;
  max_tokens?: number;
  response_format?: ResponseFormat;
  tools?: Json[];
  tool_choice?: Json;
  provider?: string;
}

export interface LlmMessage {
  role: string;
  content?: Json;
  [field: string]: Json | undefined;
}

export type ResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; json_schema: { name: string; schema: Record<string, Json>; strict?: boolean } };

const FIELDS = [
  "model",
  "messages",
  "prompt",
  "temperature",
  "max_tokens",
  "response_format",
  "tools",
  "tool_choice",
  "provider",
] as const;
const ROLES = ["system", "developer", "user", "assistant", "tool"];

export const llm: KindRules = {
  name: "llm",
  start: "agent",
  notClaimable: "run in the engine (its built-in llm agent, with the engine's providers and secrets)",
  retries: true,
  validate(node, checks) {
    // Rules added since a document was stored do not refuse it (an agent_type "llm" of its own, before this kind).
    if (checks.stored) return [];
    return payloadProblems(node.payload, false).map((p) => ({ path: `${checks.at}.${p.path}`, message: p.message }));
  },
  checkResolved(payload) {
    const problems = payloadProblems(payload, true);
    return problems.length === 0 ? null : problems.map((p) => `${p.path} ${p.message}`).join("; ");
  },
};

/**
 * Every problem of an llm payload, with its path from `payload`. Before templates are resolved
 * (`resolved` false), a field that is a template is left for `checkResolved`.
 */
export function payloadProblems(payload: unknown, resolved: boolean): Problem[] {
  if (payload === null || typeof payload !== "object" || Array.isArray(payload)) {
    return [{ path: "payload", message: 'must be an object, e.g. { "model": "gpt-4o-mini", "prompt": "..." }' }];
  }
  const p = payload as Record<string, unknown>;
  const later = (v: unknown) => !resolved && typeof v === "string" && v.includes("{{");
  const problems: Problem[] = [];
  const add = (path: string, message: string) => problems.push({ path: `payload${path}`, message });

  for (const key of Object.keys(p)) {
    if ((FIELDS as readonly string[]).includes(key)) continue;
    const near = nearest(key, FIELDS);
    add(
      `.${key}`,
      `is not a field of an llm payload${near ? ` (did you mean "${near}"?)` : ""}; the fields are ${FIELDS.join(", ")}`,
    );
  }
  if (!("model" in p)) add(".model", 'is required: the provider\'s model name, e.g. "gpt-4o-mini"');
  else if (!later(p.model) && (typeof p.model !== "string" || p.model === "")) {
    add(".model", `must be a non-empty string (the provider's model name), got ${show(p.model)}`);
  }

  const hasMessages = "messages" in p;
  const hasPrompt = "prompt" in p;
  if (hasMessages === hasPrompt) {
    add(
      "",
      hasMessages
        ? "has both messages and prompt: give one (prompt is one user message)"
        : 'needs messages (a list of { role, content }) or prompt (a string: one user message), e.g. { "prompt": "Summarize {{ input.text }}" }',
    );
  }
  if (hasPrompt && !later(p.prompt) && typeof p.prompt !== "string") {
    add(".prompt", `must be a string (one user message), got ${show(p.prompt)}`);
  }
  if (hasMessages && !later(p.messages)) problems.push(...messagesProblems(p.messages));

  if ("temperature" in p && !later(p.temperature)) {
    const t = p.temperature;
    if (typeof t !== "number" || !Number.isFinite(t) || t < 0 || t > 2) {
      add(".temperature", `must be a number from 0 to 2, got ${show(t)}`);
    }
  }
  if ("max_tokens" in p && !later(p.max_tokens)) {
    const m = p.max_tokens;
    if (typeof m !== "number" || !Number.isInteger(m) || m < 1) {
      add(".max_tokens", `must be a whole number of tokens, 1 or more, got ${show(m)}`);
    }
  }
  if ("response_format" in p && !later(p.response_format)) {
    const message = responseFormatProblem(p.response_format);
    if (message) add(".response_format", message);
  }
  if ("tools" in p && !later(p.tools)) problems.push(...toolsProblems(p.tools));
  if ("tool_choice" in p && !later(p.tool_choice)) {
    const c = p.tool_choice;
    const named = isObject(c) && c.type === "function" && isObject(c.function) && typeof c.function.name === "string";
    if (!(c === "auto" || c === "none" || c === "required" || named)) {
      add(
        ".tool_choice",
        `must be "auto", "none", "required" or { "type": "function", "function": { "name": "..." } }, got ${show(c)}`,
      );
    }
  }
  if ("provider" in p && !later(p.provider) && (typeof p.provider !== "string" || p.provider === "")) {
    add(".provider", `must be the name of one of the engine's providers (llm.providers), got ${show(p.provider)}`);
  }
  return problems;
}

function messagesProblems(messages: unknown): Problem[] {
  if (!Array.isArray(messages) || messages.length === 0) {
    return [
      {
        path: "payload.messages",
        message: `must be a non-empty list of { role, content }, got ${show(messages)}`,
      },
    ];
  }
  const problems: Problem[] = [];
  messages.forEach((m: unknown, i) => {
    const at = `payload.messages[${i}]`;
    if (!isObject(m)) {
      problems.push({ path: at, message: `must be an object { role, content }, got ${show(m)}` });
      return;
    }
    if (typeof m.role !== "string" || !ROLES.includes(m.role)) {
      problems.push({ path: `${at}.role`, message: `must be one of ${ROLES.join(", ")}, got ${show(m.role)}` });
    }
    const hasContent = typeof m.content === "string" || Array.isArray(m.content);
    // An assistant message that only calls tools has no content.
    if (!hasContent && !(m.role === "assistant" && Array.isArray(m.tool_calls))) {
      problems.push({
        path: `${at}.content`,
        message: `must be a string (or a list of content parts), got ${show(m.content)}`,
      });
    }
  });
  return problems;
}

/** Why `response_format` is not one of text, json_object or json_schema, or null. */
function responseFormatProblem(f: unknown): string | null {
  const expected =
    'must be { "type": "text" }, { "type": "json_object" } or { "type": "json_schema", "json_schema": { "name", "schema", "strict"? } }';
  if (!isObject(f)) return `${expected}, got ${show(f)}`;
  if (f.type === "text" || f.type === "json_object") return null;
  if (f.type !== "json_schema") return `${expected}, got type ${show(f.type)}`;
  const js = f.json_schema;
  if (!isObject(js)) return `.json_schema must be an object { name, schema, strict? }, got ${show(js)}`;
  if (typeof js.name !== "string" || !/^[A-Za-z0-9_-]{1,64}$/.test(js.name)) {
    return `.json_schema.name must be 1 to 64 letters, digits, _ or -, got ${show(js.name)}`;
  }
  if (!isObject(js.schema)) return `.json_schema.schema must be a JSON Schema object, got ${show(js.schema)}`;
  if ("strict" in js && typeof js.strict !== "boolean") return `.json_schema.strict must be true or false`;
  return null;
}

function toolsProblems(tools: unknown): Problem[] {
  if (!Array.isArray(tools)) {
    return [{ path: "payload.tools", message: `must be a list of OpenAI tool definitions, got ${show(tools)}` }];
  }
  const problems: Problem[] = [];
  tools.forEach((t: unknown, i) => {
    const ok = isObject(t) && t.type === "function" && isObject(t.function) && typeof t.function.name === "string";
    if (!ok) {
      problems.push({
        path: `payload.tools[${i}]`,
        message: `must be { "type": "function", "function": { "name", "description"?, "parameters"? } }, got ${show(t)}`,
      });
    }
  });
  return problems;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** A value in a message, cut short. */
export function show(v: unknown): string {
  if (v === undefined) return "nothing";
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
