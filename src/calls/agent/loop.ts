/**
 * The `agent` node's in-process agent (DESIGN §14.2): a tool-calling loop in one attempt, made
 * durable by the visit's steps (§14.1). Each model turn is the step `turn:<n>`, recorded
 * (content, tool calls, usage) before any of its tool calls starts; each tool call is the step
 * `tool:<n>:<i>`, run with the key `<execution_id>:<n>:<i>`. The conversation is these steps,
 * one message a row, so storage grows with the messages and never with their square; a model
 * request is assembled from them. A later attempt (a retry, a recovery after a crash, a redrive)
 * replays the recorded turns and calls and resumes after the last one: no recorded turn is asked
 * again, no recorded call runs again, a call in flight runs again with the same key.
 *
 * Budgets (§12) are checked before every model turn and every tool call that is not replayed.
 */
import { trace } from "@opentelemetry/api";
import type { AgentHandler, Task } from "../../agents/task.js";
import { type ApprovalDecision, type ApprovalRequest, AwaitingApproval } from "../../core/kinds/agent.js";
import type { Json, VisitError } from "../../core/types.js";
import { type AgentPayload, DEFAULT_APPROVAL_TIMEOUT_S, DEFAULT_MAX_TURNS } from "../../definition/kinds/agent.js";
import { NonRetryableError } from "../../errors.js";
import type { StepReads, StepRow } from "../../store/steps.js";
import { conversationOf } from "./messages.js";
import { type LoopTool, runCall, type ToolMessage, type ToolsContext, toolsOf, undoCalls } from "./tools.js";

export interface AgentLoopContext extends ToolsContext {
  /** The model call: the `llm` kind's handler (its providers, streaming, usage, errors). */
  llm: AgentHandler;
  /** Why no further turn or call may start under the run's budget (or an ancestor's), or null. */
  budgetReached(task: Task): Promise<VisitError | null>;
  /** Committed steps: a thread's visits (by their `thread:<key>` step) and their messages. */
  steps: Pick<StepReads, "threadSteps" | "stepsOf">;
}

/** A model turn as recorded: the assistant message, with what the turn cost and how it ended. */
export interface TurnMessage {
  role: "assistant";
  content: string;
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
  usage: { tokens_in: number; tokens_out: number } | null;
  finish_reason: string | null;
  parsed?: Json;
  [field: string]: Json | undefined;
}

export function agentLoopHandler(c: AgentLoopContext): AgentHandler {
  return async (task: Task) => {
    // The run's ending compensates the visit: its tools' recorded calls are undone.
    if (task.compensates) return undoCalls(task, c);
    // The kind checked the resolved payload before the visit could start.
    const payload = task.payload as unknown as AgentPayload;
    const tools = await toolsOf(payload, task, c);
    const declarations = [...tools.values()].map((t) => t.declaration);
    const history = payload.thread === undefined ? [] : await threadHistory(c, task, payload.thread, payload);
    const messages: Json[] = [...systemMessage(payload), ...history, ...inputMessages(payload)];
    const maxTurns = payload.max_turns ?? DEFAULT_MAX_TURNS;
    const toModel = payload.tool_errors !== "fail";
    const usage = { tokens_in: 0, tokens_out: 0 };
    let calls = 0;
    for (let turn = 1; ; turn++) {
      if (turn > maxTurns) {
        throw reasoned(
          `the model called tools for ${maxTurns} turns without answering (max_turns ${maxTurns}); raise max_turns, or tell the model in instructions when to answer`,
          "max_turns_exceeded",
        );
      }
      const reply = (await task.step(`turn:${turn}`, async () => {
        await checkBudget(c, task, `model turn ${turn}`);
        const message = (await modelTurn(c, task, payload, turn, messages, declarations)) as TurnMessage;
        turnSpan(payload, message);
        return message as unknown as Json;
      })) as unknown as TurnMessage;
      messages.push(requestMessage(reply));
      if (reply.usage) {
        usage.tokens_in += reply.usage.tokens_in;
        usage.tokens_out += reply.usage.tokens_out;
      }
      const asked = reply.tool_calls ?? [];
      if (asked.length === 0) {
        return {
          content: reply.content,
          parsed: reply.parsed ?? null,
          finish_reason: reply.finish_reason,
          turns: turn,
          tool_calls: calls,
          usage,
        } as unknown as Json;
      }
      const one = (call: (typeof asked)[number], index: number) =>
        task.step(`tool:${turn}:${index}`, async () => {
          await checkBudget(c, task, `tool call ${call.function.name} of turn ${turn}`);
          const key = `${task.execution_id}:${turn}:${index}`;
          const approved = (tool: LoopTool, args: Record<string, Json>) =>
            decisionOn(task, { key, step: `approval:${turn}:${index}`, tool: tool.name, arguments: args }, tool);
          const ctx = { key, call: `${turn}:${index}`, task, stepPrefix: `tool:${turn}:${index}`, approved };
          const result = await runCall(tools, call, ctx, toModel, c.maxResultBytes);
          toolSpan(call, result);
          return result as unknown as Json;
        }) as unknown as Promise<ToolMessage>;
      const results = payload.parallel_tool_calls === false ? await inOrder(asked, one) : await allCalls(asked, one);
      calls += asked.length;
      for (const result of results) messages.push(requestMessage(result));
    }
  };
}

function systemMessage(p: AgentPayload): Json[] {
  return p.instructions === undefined ? [] : [{ role: "system", content: p.instructions }];
}

/** The input: one user message, or the messages given. */
function inputMessages(p: AgentPayload): Json[] {
  return (typeof p.input === "string" ? [{ role: "user", content: p.input }] : p.input) as Json[];
}

/**
 * The messages a visit's thread holds before it. Joining is the step `thread:<key>` (its input
 * recorded with it): the visits that recorded that name earlier are the thread's history, each
 * its input then its turns and calls up to its answer. A visit that never answered (it failed,
 * or was redriven: its new visit joins again) adds nothing. Recovery reads the same: the visits
 * before this one's step do not change (one visit of a thread runs at a time).
 */
async function threadHistory(c: AgentLoopContext, task: Task, thread: string, p: AgentPayload): Promise<Json[]> {
  const name = `thread:${thread}`;
  await task.step(name, () => ({ input: inputMessages(p) }) as Json);
  const joined = await c.steps.threadSteps(name);
  const mine = joined.findIndex((s) => s.execution_id === task.execution_id);
  const before = joined.slice(0, mine < 0 ? joined.length : mine);
  const byVisit = new Map<string, StepRow[]>();
  for (const step of await c.steps.stepsOf(before.map((s) => s.execution_id))) {
    const list = byVisit.get(step.execution_id) ?? [];
    list.push(step);
    byVisit.set(step.execution_id, list);
  }
  const history: Json[] = [];
  for (const member of before) {
    const said = conversationOf(null, byVisit.get(member.execution_id) ?? []);
    let answer = said.length - 1;
    while (answer >= 0 && !(said[answer]?.role === "assistant" && said[answer]?.tool_calls === undefined)) answer--;
    if (answer < 0) continue;
    history.push(...((member.output as { input?: Json[] }).input ?? []));
    for (const m of said.slice(0, answer + 1)) {
      history.push(requestMessage(m as unknown as TurnMessage | ToolMessage));
    }
  }
  return history;
}

/** One model call through the llm handler; its text streams as the visit's progress. */
async function modelTurn(
  c: AgentLoopContext,
  task: Task,
  p: AgentPayload,
  turn: number,
  messages: Json[],
  tools: Json[],
): Promise<Json> {
  const settings: Record<string, Json> = { model: p.model };
  for (const field of ["provider", "temperature", "max_tokens", "response_format"] as const) {
    if (p[field] !== undefined) settings[field] = p[field] as Json;
  }
  const completion = (await c.llm({
    ...task,
    agent_type: "llm",
    // The provider may deduplicate by it: the same on every attempt of this turn.
    execution_id: `${task.execution_id}:turn:${turn}`,
    payload: { ...settings, messages, ...(tools.length > 0 ? { tools } : {}) },
    signal: task.signal,
    progress: (data) => task.progress({ turn, ...(data as Record<string, Json>) }),
  })) as {
    content: string;
    parsed: Json;
    tool_calls: { id: string; type: string; function: { name: string; arguments: string } }[];
    usage: { prompt_tokens: number; completion_tokens: number } | null;
    finish_reason: string | null;
  };
  const message: TurnMessage = {
    role: "assistant",
    content: completion.content,
    usage: completion.usage
      ? { tokens_in: completion.usage.prompt_tokens, tokens_out: completion.usage.completion_tokens }
      : null,
    finish_reason: completion.finish_reason,
  };
  if (completion.tool_calls.length > 0) {
    message.tool_calls = completion.tool_calls.map((call) => ({
      id: call.id,
      type: call.type || "function",
      function: { name: call.function.name, arguments: call.function.arguments },
    }));
  }
  if (completion.parsed !== null && completion.parsed !== undefined) message.parsed = completion.parsed;
  return message as unknown as Json;
}

/** A recorded message as the model is sent it: without what Skein keeps beside it. */
function requestMessage(m: TurnMessage | ToolMessage): Json {
  if (m.role === "tool") return { role: "tool", tool_call_id: m.tool_call_id, content: m.content } as Json;
  return { role: "assistant", content: m.content, ...(m.tool_calls ? { tool_calls: m.tool_calls } : {}) } as Json;
}

/**
 * The step's span (`skein.step`, active while the step runs) as OpenTelemetry's GenAI
 * conventions name a model call: `chat <model>`, with the model and the tokens in and out.
 */
function turnSpan(p: AgentPayload, m: TurnMessage): void {
  const span = trace.getActiveSpan();
  if (!span) return;
  span.updateName(`chat ${p.model}`);
  span.setAttributes({
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": p.model,
    ...(m.usage
      ? { "gen_ai.usage.input_tokens": m.usage.tokens_in, "gen_ai.usage.output_tokens": m.usage.tokens_out }
      : {}),
    ...(m.finish_reason ? { "gen_ai.response.finish_reasons": [m.finish_reason] } : {}),
  });
}

/** A tool call's span as the GenAI conventions name it: `execute_tool <name>`, with the call's id. */
function toolSpan(call: { id: string; function: { name: string } }, result: ToolMessage): void {
  const span = trace.getActiveSpan();
  if (!span) return;
  span.updateName(`execute_tool ${call.function.name}`);
  span.setAttributes({
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": call.function.name,
    "gen_ai.tool.call.id": call.id,
    ...(result.error ? { "error.type": "tool_error" } : {}),
  });
}

async function checkBudget(c: AgentLoopContext, task: Task, before: string): Promise<void> {
  const reached = await c.budgetReached(task);
  if (reached) throw reasoned(`${reached.message} (before ${before})`, reached.reason ?? "budget_exceeded");
}

/** A NonRetryableError whose reason the visit's error carries (handler-errors.ts). */
function reasoned(message: string, reason: string): NonRetryableError {
  return Object.assign(new NonRetryableError(message), { reason });
}

/**
 * The decision on a call waiting for approval: the step `approval:<turn>:<index>` the engine
 * records (core/kinds/agent.ts). Until there is one, the attempt ends and the visit waits.
 */
async function decisionOn(
  task: Task,
  request: Pick<ApprovalRequest, "key" | "step" | "tool" | "arguments">,
  tool: LoopTool,
): Promise<ApprovalDecision> {
  const { assignees, timeout } = tool.approval ?? {};
  return (await task.step(request.step, () => {
    throw new AwaitingApproval({
      ...request,
      ...(assignees ? { assignees } : {}),
      timeout: timeout ?? DEFAULT_APPROVAL_TIMEOUT_S,
    });
  })) as unknown as ApprovalDecision;
}

/**
 * A turn's calls at once. Each runs to its end before the turn's outcome is known: a call
 * waiting for approval does not stop the others (their results are recorded, not run again).
 */
async function allCalls<T, R>(items: T[], fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const settled = await Promise.allSettled(items.map(fn));
  const failed = settled.find((r) => r.status === "rejected" && !(r.reason instanceof AwaitingApproval));
  const waiting = settled.find((r) => r.status === "rejected");
  if (failed || waiting) throw ((failed ?? waiting) as PromiseRejectedResult).reason;
  return settled.map((r) => (r as PromiseFulfilledResult<R>).value);
}

async function inOrder<T, R>(items: T[], fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (const [i, item] of items.entries()) out.push(await fn(item, i));
  return out;
}
