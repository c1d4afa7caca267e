/**
 * Runs the support agent once, offline, and prints its conversation:
 *   npx tsx examples/support-agent/main.ts "Where is my order A1001, and how do returns work?"
 *   npx tsx examples/support-agent/main.ts "Please refund order A1002" --approve
 * A refund waits for a person: main.ts asks on the terminal (or `--approve` / `--reject` answers).
 *
 * It starts the example's model server (model-server.ts) on a free port, makes an engine whose
 * default llm provider is that server and whose MCP server `helpcenter` is
 * helpcenter-server.ts (a child process on stdio, started on first use), with the `orders` and
 * `refunds` agents (agents.ts); registers workflow.json, runs it, prints each message of the agent node's
 * conversation and the node's output, and closes everything.
 *
 * A real model instead: `SKEIN_LLM_BASE_URL` (and `SKEIN_LLM_API_KEY`), and `--model <name>`
 * (README.md). The run lives in an in-memory database; give `database` to keep it.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline/promises";
import { fileURLToPath } from "node:url";
import {
  type Budget,
  type ConversationMessage,
  createEngine,
  type PendingReview,
  type RunWithNodes,
  type WorkflowInput,
} from "skein";
import agents from "./agents.js";
import { startModelServer } from "./model-server.js";

const HERE = dirname(fileURLToPath(import.meta.url));

export interface SupportAgentOptions {
  /** An OpenAI-compatible endpoint. @defaultValue `SKEIN_LLM_BASE_URL`, else the example's model server */
  baseUrl?: string;
  /** @defaultValue `SKEIN_LLM_API_KEY` */
  apiKey?: string;
  /** The input's model. @defaultValue the workflow's: support-model */
  model?: string;
  /** Replaces the workflow's budget (`{ max_tokens: 4000 }`) for this run. */
  budget?: Budget;
  /** @defaultValue `sqlite::memory:` */
  database?: string;
  /**
   * Decides each tool call waiting for approval (`refund_order`), as the person `support-lead`
   * would in the inbox. @defaultValue every call rejected: nobody is there to approve it
   */
  decide?: (review: PendingReview) => Decision | Promise<Decision>;
}

/** A person's decision on one tool call. */
export interface Decision {
  decision: "approve" | "reject";
  comment?: string;
}

export interface SupportAgentResult {
  run: RunWithNodes;
  /** The agent node's conversation: instructions, the message, then each model turn and tool call. */
  messages: ConversationMessage[];
}

export async function runSupportAgent(message: string, options: SupportAgentOptions = {}): Promise<SupportAgentResult> {
  const given = options.baseUrl ?? (process.env.SKEIN_LLM_BASE_URL || undefined);
  const model = given === undefined ? await startModelServer() : null;
  try {
    const apiKey = options.apiKey ?? (process.env.SKEIN_LLM_API_KEY || undefined);
    const engine = await createEngine({
      database: options.database ?? "sqlite::memory:",
      agents,
      llm: {
        providers: {
          default: { base_url: given ?? (model?.baseUrl as string), ...(apiKey ? { api_key: apiKey } : {}) },
        },
      },
      mcp: {
        servers: {
          // Started in this directory, so that `--import tsx` finds tsx wherever the example is.
          helpcenter: {
            command: process.execPath,
            args: ["--import", "tsx", join(HERE, "helpcenter-server.ts")],
            cwd: HERE,
          },
        },
      },
    });
    try {
      await engine.registerWorkflow(JSON.parse(readFileSync(join(HERE, "workflow.json"), "utf8")) as WorkflowInput);
      const input = { message, ...(options.model ? { model: options.model } : {}) };
      const started = await engine.startRun("support-agent", {
        input,
        ...(options.budget ? { budget: options.budget } : {}),
      });
      // Each call waiting for approval is decided as it comes (the engine holds nothing while it waits).
      const decide = options.decide ?? (() => ({ decision: "reject" as const, comment: "nobody approved it" }));
      const decisions: Promise<unknown>[] = [];
      const stop = engine.subscribe(
        (e) => {
          if (e.type !== "review.requested") return;
          decisions.push(
            (async () => {
              const [review] = await engine.listReviews({ runIds: [started.run_id] });
              if (!review) return;
              const { decision, comment } = await decide(review);
              await engine.review(started.run_id, review.node_id, {
                decision,
                by: "support-lead",
                execution_id: review.execution_id,
                ...(comment ? { comment } : {}),
              });
            })(),
          );
        },
        { run_id: started.run_id, from: 0 },
      );
      const run = await engine.waitForRun(started.run_id).finally(stop);
      await Promise.all(decisions);
      const messages: ConversationMessage[] = [];
      let after = -1;
      for (;;) {
        const page = await engine.listMessages(run.run_id, "assist", { after });
        messages.push(...page.messages);
        if (page.next_after === null) break;
        after = page.next_after;
      }
      return { run, messages };
    } finally {
      await engine.close(); // and the helpcenter process with it
    }
  } finally {
    await model?.close();
  }
}

/** One line (or a few) per message: who said it, what, and the tokens of a model turn. */
export function formatMessage(m: ConversationMessage): string {
  const text = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
  if (m.role === "assistant") {
    const calls = (m.tool_calls ?? []) as { function: { name: string; arguments: string } }[];
    const usage = m.usage as { tokens_in: number; tokens_out: number } | undefined;
    const said = [text, ...calls.map((c) => `calls ${c.function.name}(${c.function.arguments})`)].filter((s) => s);
    const cost = usage ? `  [${usage.tokens_in} tokens in, ${usage.tokens_out} out]` : "";
    return `assistant (turn ${m.turn})${cost}\n${said.map((s) => `  ${s}`).join("\n")}`;
  }
  if (m.role === "tool") {
    const approval = m.approval as { decision: string; by: string | null } | undefined;
    const note = approval
      ? ` (${approval.decision === "approve" ? `approved by ${approval.by}` : "not approved"})`
      : m.error
        ? " (failed)"
        : "";
    return `tool ${m.name}${note}\n  ${text}`;
  }
  return `${m.role}\n  ${text}`;
}

/** Asks on the terminal whether to approve a tool call (`--approve` or `--reject` answer for you). */
async function askPerson(review: PendingReview, flag: "approve" | "reject" | null): Promise<Decision> {
  const { tool, arguments: args } = review.data as { tool: string; arguments: unknown };
  const call = `${tool}(${JSON.stringify(args)})`;
  if (flag !== null) {
    console.log(`approval: ${call}: ${flag} (--${flag})`);
    return { decision: flag, comment: `--${flag} on the command line` };
  }
  const terminal = createInterface({ input: process.stdin, output: process.stdout });
  try {
    const answer = await terminal.question(`The agent wants to call ${call}. Approve? [y/N] `);
    return /^y(es)?$/i.test(answer.trim()) ? { decision: "approve" } : { decision: "reject", comment: "declined" };
  } finally {
    terminal.close();
  }
}

// `npx tsx examples/support-agent/main.ts "<message>" [--model <name>] [--approve | --reject]`
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  const at = args.indexOf("--model");
  const model = at === -1 ? undefined : args.splice(at, 2)[1];
  const flags = (["approve", "reject"] as const).filter((f) => args.includes(`--${f}`));
  const flag = flags[0] ?? null;
  const message = args.find((a) => !a.startsWith("--")) ?? "Where is my order A1001, and how do returns work?";
  const decide = (review: PendingReview) => askPerson(review, flag);
  const { run, messages } = await runSupportAgent(message, { decide, ...(model ? { model } : {}) });
  for (const m of messages) console.log(formatMessage(m));
  const node = run.nodes.find((n) => n.node_id === "assist");
  console.log(`\nrun ${run.run_id} ${run.status}`);
  if (node?.output) console.log("output:", JSON.stringify(node.output, null, 2));
  if (node?.error) console.log(`error (${node.reason}): ${node.error.message}`);
  process.exitCode = run.status === "SUCCEEDED" ? 0 : 1;
}
