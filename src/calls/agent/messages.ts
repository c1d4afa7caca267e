/**
 * An agent visit's conversation as stored (DESIGN §14.2): the first messages its resolved payload
 * gives (instructions, input), then one message a recorded step, in the order the loop made them:
 * `turn:<n>` an assistant message, `tool:<n>:<i>` a tool's result. Steps of the tools themselves
 * (`tool:<n>:<i>/<name>`) and MCP tool lists (`mcp:<server>`) are not messages.
 */
import type { Json } from "../../core/types.js";
import type { AgentPayload } from "../../definition/kinds/agent.js";
import type { StepRow } from "../../store/store.js";

export interface ConversationMessage {
  /** Its place in the visit's conversation, from 0. */
  seq: number;
  role: string;
  content: Json;
  /** An assistant message's tool calls (OpenAI's shape). */
  tool_calls?: Json;
  /** A tool message's call id and tool name. */
  tool_call_id?: string;
  name?: string;
  /** A tool call that failed, or whose arguments were invalid: `content` says why. */
  error?: boolean;
  /** A call of a tool with `approval`: the decision it waited for (`decision`, `by`, `comment`). */
  approval?: Json;
  /** What a model turn or a tool call cost. */
  usage?: Json;
  finish_reason?: Json;
  /** The model turn it is (assistant) or belongs to (tool). */
  turn?: number;
  /** The attempt that recorded it; absent for the payload's messages. */
  attempt?: number;
  recorded_at?: number;
}

const TURN = /^turn:(\d+)$/;
const TOOL = /^tool:(\d+):(\d+)$/;

/** Where a step's message goes: [turn, 0] for a model turn, [turn, 1 + index] for a call; null for other steps. */
function placeOf(name: string): [number, number] | null {
  const turn = TURN.exec(name);
  if (turn) return [Number(turn[1]), 0];
  const tool = TOOL.exec(name);
  return tool ? [Number(tool[1]), 1 + Number(tool[2])] : null;
}

/** The visit's messages: its payload's first ones, then its recorded turns and tool calls. */
export function conversationOf(payload: Json | null, steps: readonly StepRow[]): ConversationMessage[] {
  const out: ConversationMessage[] = [];
  const add = (m: Omit<ConversationMessage, "seq">) => out.push({ seq: out.length, ...m });
  const p = (payload ?? {}) as Partial<AgentPayload>;
  if (typeof p.instructions === "string") add({ role: "system", content: p.instructions });
  if (typeof p.input === "string") add({ role: "user", content: p.input });
  else if (Array.isArray(p.input)) {
    for (const m of p.input as { role?: string; content?: Json }[])
      add({ role: String(m.role), content: m.content ?? null });
  }
  // Parallel calls are recorded as they end: the conversation has them in the order the model made them.
  const ordered = steps
    .map((step) => ({ step, at: placeOf(step.name) }))
    .filter((s): s is { step: StepRow; at: [number, number] } => s.at !== null)
    .sort((a, b) => a.at[0] - b.at[0] || a.at[1] - b.at[1]);
  for (const { step } of ordered) {
    const turn = TURN.exec(step.name);
    const tool = TOOL.exec(step.name);
    const o = (step.output ?? {}) as Record<string, Json>;
    const recorded = { attempt: step.attempt, recorded_at: step.recorded_at };
    if (turn) {
      add({
        role: "assistant",
        content: o.content ?? null,
        ...(o.tool_calls ? { tool_calls: o.tool_calls } : {}),
        ...(o.usage ? { usage: o.usage } : {}),
        finish_reason: o.finish_reason ?? null,
        turn: Number(turn[1]),
        ...recorded,
      });
    } else if (tool) {
      add({
        role: "tool",
        content: o.content ?? null,
        tool_call_id: String(o.tool_call_id),
        name: String(o.name),
        ...(o.error === true ? { error: true } : {}),
        ...(o.approval ? { approval: o.approval } : {}),
        ...(o.usage ? { usage: o.usage } : {}),
        turn: Number(tool[1]),
        ...recorded,
      });
    }
  }
  return out;
}
