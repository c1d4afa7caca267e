/**
 * The tools of one `agent` visit (DESIGN §14.2): what the model is offered, and one call run to
 * its message. A call's arguments are checked against its `parameters` first (invalid ones go
 * back to the model); then the tool's agent runs, in this process, with the call's key
 * `<execution_id>:<turn>:<index>` as its `execution_id` (its idempotency key), or the MCP server
 * is called with the key in `_meta`, or the call is a child run of the visit, under an engine key
 * made from the call's: of the workflow a `workflow` tool names, or of one node of the tool's
 * agent when no agent of this engine serves it (an external worker claims it). A failed call is retried `retry_count` times at once; its
 * last error goes back to the model (`tool_errors: "to_model"`) or fails the visit (`"fail"`).
 */
import type { ValidateFunction } from "ajv";
import { type AgentHandler, isRouted, route, type Task } from "../../agents/task.js";
import type { ApprovalDecision } from "../../core/kinds/agent.js";
import type { Json, Usage } from "../../core/types.js";
import { compilePayload } from "../../definition/expressions.js";
import {
  type AgentPayload,
  type AgentTool,
  type McpToolSet,
  type ToolApproval,
  toolSchemas,
} from "../../definition/kinds/agent.js";
import { NonRetryableError } from "../../errors.js";
import type { StepReads } from "../../store/steps.js";

/** A tool as the loop holds it: its OpenAI declaration and how a call runs. */
export interface LoopTool {
  name: string;
  /** What the model is sent: `{ type: "function", function: { name, description, parameters } }`. */
  declaration: Json;
  /** Null: any arguments. */
  check: ValidateFunction | null;
  /** Runs one call; throws on failure. Answers the tool's result (JSON) and the usage it reported. */
  run(args: Record<string, Json>, call: CallContext): Promise<{ output: Json; usage: Usage | null }>;
  retries: number;
  /** One call's time limit, ms; null: the visit's. */
  timeoutMs: number | null;
  /** The agent that undoes a recorded call (the tool's `compensation`), or null. */
  undo: string | null;
  /** Each call waits for a person's decision first; null: calls run at once. */
  approval: ToolApproval | null;
}

/** What one call of a tool is given. */
export interface CallContext {
  /** `<execution_id>:<turn>:<index>`: the same every time this call runs. */
  key: string;
  /** `<turn>:<index>`. */
  call: string;
  /** The visit's task (the agent node's). */
  task: Task;
  /** The call's try within this attempt, from 1 (its retries). */
  attempt: number;
  signal: AbortSignal;
  /** The steps of this call's try (`<step>` under the call's name). */
  stepPrefix: string;
  /**
   * The decision on a call of a tool with `approval`, recorded by the engine; throws
   * AwaitingApproval (ending the attempt) while there is none yet.
   */
  approved(tool: LoopTool, args: Record<string, Json>): Promise<ApprovalDecision>;
}

/** The tool message a call gives the model, as recorded (one message a row). */
export interface ToolMessage {
  role: "tool";
  tool_call_id: string;
  name: string;
  content: string;
  /** The call failed (or its arguments were invalid); `content` says why. */
  error?: true;
  usage?: Usage;
  /** A successful call of a tool with `compensation`: what undoing it needs. */
  undo?: { agent_type: string; args: Record<string, Json> };
  /** A tool with `approval`: the decision its call waited for. */
  approval?: ApprovalDecision;
}

/** What the loop needs of the engine's MCP clients (src/calls/mcp.ts). */
export interface McpServers {
  names(): string[];
  listTools(
    server: string,
    signal?: AbortSignal,
  ): Promise<{ name: string; description: string; parameters: Record<string, Json> }[]>;
  callTool(
    server: string,
    name: string,
    args: Record<string, Json>,
    idempotencyKey: string,
    signal?: AbortSignal,
  ): Promise<{ content: string; isError: boolean }>;
}

/** A call run as a child run of the visit: of a workflow, or of the tool's own workflow (a node of its agent). */
export type ChildCall = { workflow_id: string; version: number | null; input: Json } | { tool: string; input: Json };

export interface ToolsContext {
  /** This engine's in-process agents by agent_type (a handler, http, llm). */
  handler(agentType: string): AgentHandler | undefined;
  /**
   * Starts (or finds, after a crash: its key is the call's) the child run that is call
   * `<turn>:<index>` of the visit, and waits for its end: its output, or throws why it failed.
   */
  childRun(task: Task, call: string, request: ChildCall, signal: AbortSignal): Promise<Json>;
  /** The largest result a call may give the model, in bytes (the engine's maxPayloadBytes, less room for its record). */
  maxResultBytes: number;
  /** The engine's MCP servers (null: no `mcp` option). */
  mcp: McpServers | null;
}

/**
 * The visit's tools, by name. An MCP server's list is read once per visit and recorded as the
 * step `mcp:<server>`: recovery and redrive use the recorded list.
 */
export async function toolsOf(payload: AgentPayload, task: Task, c: ToolsContext): Promise<Map<string, LoopTool>> {
  const tools = new Map<string, LoopTool>();
  for (const [i, declared] of (payload.tools ?? []).entries()) {
    if ("mcp" in declared) {
      for (const tool of await mcpTools(declared, task, c, i)) tools.set(tool.name, tool);
      continue;
    }
    if (tools.has(declared.name)) {
      throw new NonRetryableError(
        `payload.tools[${i}]: a tool named "${declared.name}" is declared twice (an MCP server's?)`,
      );
    }
    tools.set(declared.name, agentTool(declared, c, i));
  }
  return tools;
}

function agentTool(declared: AgentTool, c: ToolsContext, i: number): LoopTool {
  const payload =
    declared.payload === undefined ? null : compilePayload(declared.payload, `payload.tools[${i}].payload`);
  return {
    name: declared.name,
    declaration: declarationOf(declared.name, declared.description, declared.parameters),
    check: checkerOf(declared.parameters, `payload.tools[${i}].parameters`),
    retries: declared.retry_count ?? 0,
    timeoutMs: declared.timeout === undefined ? null : declared.timeout * 1000,
    undo: declared.compensation?.agent_type ?? null,
    approval: declared.approval ?? null,
    run: async (args, call) => {
      const template = payload?.template ?? null;
      const resolved = template
        ? ((await template.resolve({
            args,
            input: call.task.input,
            nodes: {},
            run: { run_id: call.task.run_id, trace_id: call.task.trace_id },
          })) as Json)
        : (args as Json);
      // A `workflow` tool's call is a child run of the workflow its payload names.
      if (declared.agent_type === "workflow") {
        const p = resolved as { workflow_id?: unknown; version?: unknown; input?: Json } | null;
        if (typeof p?.workflow_id !== "string") {
          throw new ConfigError(
            `tool "${declared.name}" is a workflow tool: its payload must give workflow_id (and input), got ${JSON.stringify(resolved)}`,
          );
        }
        const version = typeof p.version === "number" ? p.version : null;
        const request = { workflow_id: p.workflow_id, version, input: p.input ?? {} };
        return { output: await c.childRun(call.task, call.call, request, call.signal), usage: null };
      }
      const handler = c.handler(declared.agent_type);
      // No agent of this engine serves it: a run of one node of that agent, which a worker claims.
      if (!handler) {
        const request = { tool: declared.name, input: resolved };
        return { output: await c.childRun(call.task, call.call, request, call.signal), usage: null };
      }
      let usage: Usage | null = null;
      const toolTask: Task = {
        ...call.task,
        agent_type: declared.agent_type,
        attempt: call.attempt,
        execution_id: call.key,
        payload: resolved,
        trigger: null,
        signal: call.signal,
        progress: () => {},
        reportUsage: (u) => {
          call.task.reportUsage(u);
          usage = addTo(usage, u);
        },
        step: (name, fn) => call.task.step(`${call.stepPrefix}/${name}`, fn),
        route,
      };
      const value = await handler(toolTask);
      const output = isRouted(value) ? value.output : value;
      return { output: (output === undefined ? null : output) as Json, usage };
    },
  };
}

async function mcpTools(declared: McpToolSet, task: Task, c: ToolsContext, i: number): Promise<LoopTool[]> {
  const mcp = c.mcp;
  if (!mcp?.names().includes(declared.mcp)) {
    const known = mcp?.names() ?? [];
    throw new ConfigError(
      `payload.tools[${i}].mcp names server "${declared.mcp}", which the engine's mcp option does not have (${known.length ? `it has ${known.join(", ")}` : "it has none"})`,
    );
  }
  const listed = await task.step(
    `mcp:${declared.mcp}`,
    async () => (await mcp.listTools(declared.mcp, task.signal)) as unknown as Json,
  );
  const all = listed as unknown as { name: string; description: string; parameters: Record<string, Json> }[];
  const wanted = declared.tools ?? all.map((t) => t.name);
  const missing = wanted.filter((name) => !all.some((t) => t.name === name));
  if (missing.length > 0) {
    throw new ConfigError(
      `payload.tools[${i}].tools names ${missing.map((n) => `"${n}"`).join(", ")}, which MCP server "${declared.mcp}" does not list (it lists ${all.map((t) => t.name).join(", ") || "no tools"})`,
    );
  }
  return all
    .filter((t) => wanted.includes(t.name))
    .map((t) => ({
      name: t.name,
      declaration: declarationOf(t.name, t.description, t.parameters),
      check: checkerOf(t.parameters, `MCP server "${declared.mcp}" tool "${t.name}" inputSchema`),
      retries: 0,
      timeoutMs: null,
      undo: null,
      approval: declared.approval ?? null,
      run: async (args, call) => {
        const result = await mcp.callTool(declared.mcp, t.name, args, call.key, call.signal);
        if (result.isError) throw new Error(result.content);
        return { output: result.content, usage: null };
      },
    }));
}

/**
 * Runs one call of the model to its tool message: arguments checked, the tool run (retried as it
 * allows). A failure is the message's content (`error: true`) when `toModel`, else thrown.
 */
export async function runCall(
  tools: ReadonlyMap<string, LoopTool>,
  call: { id: string; function: { name: string; arguments: string } },
  ctx: Omit<CallContext, "attempt" | "signal">,
  toModel: boolean,
  maxResultBytes: number,
): Promise<ToolMessage> {
  const name = call.function.name;
  const message = (content: string, extra: Partial<ToolMessage> = {}): ToolMessage => ({
    role: "tool",
    tool_call_id: call.id,
    name,
    content,
    ...extra,
  });
  const tool = tools.get(name);
  if (!tool) {
    const names = [...tools.keys()];
    return message(`error: there is no tool named "${name}"; the tools are ${names.join(", ") || "none"}`, {
      error: true,
    });
  }
  let args: Record<string, Json>;
  try {
    const parsed = JSON.parse(call.function.arguments || "{}") as unknown;
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("not a JSON object");
    args = parsed as Record<string, Json>;
  } catch (e) {
    return message(
      `error: the arguments are not a JSON object (${(e as Error).message}); call ${name} again with valid JSON`,
      {
        error: true,
      },
    );
  }
  if (tool.check && !tool.check(args)) {
    const why = toolSchemas().errorsText(tool.check.errors, { dataVar: "arguments" });
    return message(
      `error: invalid arguments for ${name}: ${why}; call it again with arguments that match its parameters`,
      {
        error: true,
      },
    );
  }
  let approval: ApprovalDecision | undefined;
  if (tool.approval) {
    approval = await ctx.approved(tool, args);
    if (approval.decision !== "approve") {
      // Not the tool's failure: the model hears who said no, and may go on without it.
      const by = approval.decision === "timeout" ? "timeout" : (approval.by ?? "a reviewer");
      return message(`rejected by ${by}${approval.comment ? `: ${approval.comment}` : ""}`, { error: true, approval });
    }
  }
  // A call that will need undoing is recorded as begun first: if the run ends while it runs (a
  // cancel, a crash then a failure), its compensation is owed though it recorded no result.
  if (tool.undo) {
    const undo = { agent_type: tool.undo, args };
    await ctx.task.step(`begun:${ctx.stepPrefix.slice("tool:".length)}`, () => ({ tool: name, undo }) as Json);
  }
  let last: unknown = null;
  for (let attempt = 1; attempt <= tool.retries + 1; attempt++) {
    ctx.task.signal.throwIfAborted();
    try {
      const stepPrefix = attempt === 1 ? ctx.stepPrefix : `${ctx.stepPrefix}#${attempt}`;
      const { output, usage } = await withTimeout(tool, ctx.task.signal, (signal) =>
        tool.run(args, { ...ctx, stepPrefix, attempt, signal }),
      );
      const content = typeof output === "string" ? output : JSON.stringify(output);
      const size = Buffer.byteLength(content);
      if (size > maxResultBytes) {
        // Not the model's to see whole, nor the store's to keep: the model hears why, and may ask for less.
        throw new NonRetryableError(
          `the result is ${size} bytes, over the limit of ${maxResultBytes} a tool's result may give the model; ask for less`,
        );
      }
      return message(content, {
        ...(usage ? { usage } : {}),
        ...(tool.undo ? { undo: { agent_type: tool.undo, args } } : {}),
        ...(approval ? { approval } : {}),
      });
    } catch (e) {
      // Cancelled, timed out, or the attempt lost its visit: not the tool's failure to report.
      if (ctx.task.signal.aborted) throw ctx.task.signal.reason;
      if (e instanceof ConfigError) throw e;
      last = e;
      if (e instanceof NonRetryableError) break;
    }
  }
  const text = last instanceof Error ? last.message : String(last);
  if (!toModel) {
    throw new NonRetryableError(`tool "${name}" failed (tool_errors is "fail"): ${text}`, { cause: last });
  }
  return message(`error: ${text}`, { error: true });
}

/**
 * Undoes a visit's calls (DESIGN §6, a tool's `compensation`): newest first, each once (a step
 * of the compensation's attempt), with `<call key>:compensate` as its execution_id. A recorded
 * call is undone with its result; a call begun but never recorded (running when the visit was
 * cancelled, or when its engine died) with `result: null` and `in_flight: true`: it may or may
 * not have acted, and its key tells the service which. A failed call, one rejected by its
 * reviewer, and one never begun are not undone.
 */
export async function undoCalls(task: Task, c: ToolsContext & { steps: Pick<StepReads, "stepsOf"> }): Promise<Json> {
  const visit = task.compensates?.execution_id as string;
  const steps = await c.steps.stepsOf([visit]);
  const recorded = new Map<string, ToolMessage>();
  const begun = new Map<string, { tool: string; undo: NonNullable<ToolMessage["undo"]> }>();
  for (const s of steps) {
    const call = CALL.exec(s.name)?.[1];
    if (call !== undefined) recorded.set(call, s.output as unknown as ToolMessage);
    const start = BEGUN.exec(s.name)?.[1];
    if (start !== undefined)
      begun.set(
        start,
        s.output as unknown as { tool: string; undo: { agent_type: string; args: Record<string, Json> } },
      );
  }
  const owed: { at: string; tool: string; agent_type: string; args: Record<string, Json>; payload: Json }[] = [];
  // Calls recorded before `begun:` existed have only their record.
  for (const at of new Set([...begun.keys(), ...recorded.keys()])) {
    const done = recorded.get(at);
    if (done !== undefined && done.undo === undefined) continue; // failed, rejected, or no compensation
    const undo = done?.undo ?? begun.get(at)?.undo;
    if (!undo) continue;
    const name = done?.name ?? begun.get(at)?.tool ?? "";
    const payload = done
      ? { tool: name, args: undo.args, result: done.content }
      : { tool: name, args: undo.args, result: null, in_flight: true };
    owed.push({ at, tool: name, agent_type: undo.agent_type, args: undo.args, payload: payload as Json });
  }
  const order = (at: string) => at.split(":").map(Number) as [number, number];
  owed.sort((a, b) => order(b.at)[0] - order(a.at)[0] || order(b.at)[1] - order(a.at)[1]);
  const undone: string[] = [];
  for (const call of owed) {
    const key = `${visit}:${call.at}`;
    await task.step(`undo:${call.at}`, async () => {
      const handler = c.handler(call.agent_type);
      if (!handler) {
        throw new ConfigError(
          `tool "${call.tool}" names compensation agent_type "${call.agent_type}", which this engine does not run in its process`,
        );
      }
      const value = await handler({
        ...task,
        agent_type: call.agent_type,
        execution_id: `${key}:compensate`,
        payload: call.payload,
        step: (name, fn) => task.step(`undo:${call.at}/${name}`, fn),
      });
      return (isRouted(value) ? value.output : (value ?? null)) as Json;
    });
    undone.push(key);
  }
  return { undone } as Json;
}

const CALL = /^tool:(\d+:\d+)$/;
/** `begun:<turn>:<index>`: a call of a tool with compensation, recorded as it starts. */
const BEGUN = /^begun:(\d+:\d+)$/;

/** Runs a call within the tool's timeout: past it the call's signal aborts and it fails, even if it goes on. */
async function withTimeout<T>(
  tool: LoopTool,
  visit: AbortSignal,
  run: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  if (tool.timeoutMs === null) return run(visit);
  const timer = new AbortController();
  const signal = AbortSignal.any([visit, timer.signal]);
  let handle: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    handle = setTimeout(() => {
      const error = new Error(`tool "${tool.name}" timed out after ${tool.timeoutMs} ms (its timeout)`);
      timer.abort(error);
      reject(error);
    }, tool.timeoutMs as number);
  });
  try {
    return await Promise.race([run(signal), timedOut]);
  } finally {
    clearTimeout(handle);
  }
}

/** A mistake in the workflow or the engine's options, not the model's: fails the visit. */
export class ConfigError extends NonRetryableError {}

function declarationOf(
  name: string,
  description: string | undefined,
  parameters: Record<string, Json> | undefined,
): Json {
  return {
    type: "function",
    function: {
      name,
      ...(description === undefined ? {} : { description }),
      parameters: parameters ?? { type: "object", properties: {} },
    },
  };
}

/** Compiled checkers by their schema's JSON: each visit reads its payload anew, and ajv keys its own cache by object. */
const checkers = new Map<string, ValidateFunction>();
const CHECKERS_KEPT = 1000;

function checkerOf(parameters: Record<string, Json> | undefined, where: string): ValidateFunction | null {
  if (parameters === undefined) return null;
  const key = JSON.stringify(parameters);
  const kept = checkers.get(key);
  if (kept) return kept;
  try {
    const check = toolSchemas().compile(parameters);
    if (checkers.size >= CHECKERS_KEPT) checkers.clear();
    checkers.set(key, check);
    return check;
  } catch (e) {
    throw new ConfigError(`${where} is not a JSON Schema ajv can compile: ${(e as Error).message}`);
  }
}

function addTo(total: Usage | null, u: Usage): Usage {
  return {
    tokens_in: (total?.tokens_in ?? 0) + (u.tokens_in ?? 0),
    tokens_out: (total?.tokens_out ?? 0) + (u.tokens_out ?? 0),
    ...(u.cost !== undefined || total?.cost !== undefined ? { cost: (total?.cost ?? 0) + (u.cost ?? 0) } : {}),
  };
}
