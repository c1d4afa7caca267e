/** The report of a run: status, duration, error, per-node times and retries, agents' conversations, compensations, steps, output. */
import type { ConversationMessage, Run, RunWithNodes, Visit } from "../index.js";
import type { StepRow } from "../store/store.js";
import { withMapNote } from "./map-note.js";
import { formatMs, formatTime, oneLine, table } from "./output.js";
import { visitWaitNote } from "./waiting.js";

/** An agent node's conversation in its current visit (listMessages), for the report's line of it. */
export interface AgentConversation {
  node_id: string;
  messages: readonly ConversationMessage[];
  /** A tool call waits for approval (the node is IN_REVIEW): not a message yet. */
  waiting?: boolean;
}

/**
 * The run's report as text; `visits` are all of its visits (loops and superseded ones included),
 * `steps` its durable steps, `conversations` its agent nodes' current conversations.
 */
export function runReport(
  run: RunWithNodes,
  visits: readonly Visit[],
  now = Date.now(),
  steps: readonly StepRow[] = [],
  conversations: readonly AgentConversation[] = [],
): string {
  const ended = run.ended_at !== null;
  const duration = formatMs((run.ended_at ?? now) - run.created_at);
  const lines = [
    `run ${run.run_id}  ${run.workflow_id} v${run.workflow_version}  ${run.status}  ${ended ? "in" : "for"} ${duration}`,
  ];
  if (run.parent) {
    const p = run.parent;
    const item = p.item === undefined ? "" : `, item ${p.item}`;
    lines.push(`child of run ${p.run_id} (node ${p.node_id}, visit ${p.visit}, attempt ${p.attempt}${item})`);
  }
  if (run.triggered_by) {
    const t = run.triggered_by;
    const once = t.idempotency_key === t.event_id ? "" : `, idempotency key ${t.idempotency_key}`;
    lines.push(`triggered by event ${t.event} (key ${t.key}, event ${t.event_id}${once})`);
  }
  if (run.error) lines.push(`error: ${run.error.message}`);
  const usage = usageLine(run);
  if (usage) lines.push(usage);
  if (run.needs_attention) {
    lines.push(
      `needs attention: a compensation failed for good; undo its effect by hand, then skein retry ${run.run_id} --force`,
    );
  }
  if (run.queued) {
    lines.push(
      run.queued.reason === "debounce"
        ? `queued: debounced until ${formatTime(run.queued.until ?? null)} (a start of key "${run.key}" before then moves it)`
        : `queued behind the running run of key "${run.key}": it begins when that one and those queued before it end`,
    );
  }
  if (run.paused) {
    const p = run.paused;
    lines.push(
      `paused${p.by ? ` by ${p.by}` : ""}${p.reason ? `: ${p.reason}` : ""}; ` +
        (p.node_id === undefined
          ? `skein unpause ${run.run_id} lets its nodes start`
          : `skein unpause ${run.run_id} gives node ${p.node_id} one more attempt, skein fail-node ${run.run_id} ${p.node_id} takes its failure path`),
    );
  }
  const byNode = new Map<string, Visit[]>();
  for (const v of visits) byNode.set(v.node_id, [...(byNode.get(v.node_id) ?? []), v]);
  const rows = run.nodes.map((current) => {
    const all = byNode.get(current.node_id) ?? [current];
    const attempts = all.reduce((n, v) => n + v.attempt, 0);
    const retries = all.reduce((n, v) => n + Math.max(0, v.attempt - 1), 0);
    const time = all.reduce((ms, v) => ms + (v.started_at === null ? 0 : (v.ended_at ?? now) - v.started_at), 0);
    const started = all.some((v) => v.started_at !== null);
    const note = withMapNote(current.items, visitWaitNote(current) ?? current.error?.message ?? current.reason ?? "");
    return [
      current.node_id,
      current.state,
      String(all.length),
      String(attempts),
      String(retries),
      started ? formatMs(time) : "-",
      oneLine(note, 100),
    ];
  });
  lines.push("", table(["node", "state", "visits", "attempts", "retries", "time", "note"], rows));
  if (conversations.length > 0) {
    // Agent nodes (DESIGN §14.2): how far each one's tool-calling loop got in its current visit.
    lines.push("", ...conversations.map(conversationLine));
  }
  if (run.compensations.length > 0) {
    // In the order they run (DESIGN §6): the failing step, cancelled ones, then successes newest first.
    const undo = [...run.compensations].sort((a, b) => a.seq - b.seq);
    lines.push(
      "",
      "compensations:",
      table(
        ["seq", "node", "agent_type", "state", "attempts", "note"],
        undo.map((c) => [
          String(c.seq),
          `${c.node_id}#${c.visit}`,
          c.agent_type,
          c.state,
          String(c.attempt),
          oneLine(c.error?.message ?? c.reason ?? "", 100),
        ]),
      ),
    );
  }
  if (run.children.length > 0) {
    lines.push(
      "",
      "child runs:",
      table(
        ["node", "visit", "attempt", "run", "workflow", "status"],
        run.children.map((c) => [c.node_id, String(c.visit), String(c.attempt), c.run_id, c.workflow_id, c.status]),
      ),
    );
  }
  if (steps.length > 0) {
    // Durable steps (DESIGN §14.1): what a later attempt of the visit gets without running them again.
    lines.push(
      "",
      "steps:",
      table(
        ["node", "step", "attempt", "size", "recorded"],
        steps.map((s) => [
          `${s.node_id}#${s.visit}`,
          oneLine(s.name, 60),
          String(s.attempt),
          `${s.size} B`,
          formatTime(s.recorded_at),
        ]),
      ),
    );
  }
  if (ended && run.output !== null) lines.push("", "output:", JSON.stringify(run.output, null, 2));
  return lines.join("\n");
}

/**
 * `assist: agent 3 turns, 5 tool calls, 1 failed (1 waiting for approval)`: its model turns and
 * tool calls so far. A call its reviewer rejected did not fail: the model was told.
 */
export function conversationLine(c: AgentConversation): string {
  const turns = c.messages.filter((m) => m.role === "assistant").length;
  const tools = c.messages.filter((m) => m.role === "tool");
  const failed = tools.filter((m) => m.error === true && m.approval === undefined).length;
  const counts = [plural(turns, "turn"), plural(tools.length + (c.waiting ? 1 : 0), "tool call")];
  if (failed > 0) counts.push(`${failed} failed`);
  return `${c.node_id}: agent ${counts.join(", ")}${c.waiting ? " (1 waiting for approval)" : ""}`;
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

/**
 * The run's usage (its own and its child runs') and its budget in one line (DESIGN §12); null for
 * a run that reported nothing and has no budget.
 */
export function usageLine(run: Pick<Run, "usage" | "budget">): string | null {
  const { usage, budget } = run;
  const reported = usage.tokens_in > 0 || usage.tokens_out > 0 || usage.cost > 0;
  if (!reported && !budget) return null;
  const tokens = usage.tokens_in + usage.tokens_out;
  const parts = [
    `usage: ${tokens} tokens (in ${usage.tokens_in}, out ${usage.tokens_out}), cost ${figure(usage.cost)}`,
  ];
  if (budget) {
    const limits = [
      ...(budget.max_tokens === undefined ? [] : [`max_tokens ${budget.max_tokens}`]),
      ...(budget.max_cost === undefined ? [] : [`max_cost ${budget.max_cost}`]),
    ];
    parts.push(`budget: ${limits.join(", ")}`);
  }
  return parts.join("; ");
}

/** A summed figure as people write it: float sums (0.1 + 0.2) rounded to 10 significant digits. */
function figure(n: number): string {
  return String(Number(n.toPrecision(10)));
}
