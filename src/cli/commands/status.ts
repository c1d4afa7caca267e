/** `skein status <run_id>`: a run's status and its nodes. */
import type { Command } from "commander";
import type { ConversationMessage, Engine, RunWithNodes } from "../../index.js";
import { getRunOrFail, withClient } from "../database.js";
import { dbOf, examples, RUN_ID_HELP } from "../options.js";
import { printJson, println } from "../output.js";
import { type AgentConversation, runReport } from "../summary.js";

export function registerStatus(program: Command): void {
  program
    .command("status")
    .summary("show a run and its nodes")
    .description(
      "show a run: status, duration, error, a table of its nodes, each agent node's turns and tool calls, and a table of the durable steps its attempts recorded (--json: the run with its nodes)",
    )
    .argument("<run_id>", RUN_ID_HELP)
    .option("--json", "print the run with its nodes as JSON")
    .addHelpText("after", examples("skein status 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f --json"))
    .action(async (given: string, options: { json?: boolean }, command: Command) => {
      await withClient(dbOf(command), async (client) => {
        const run = await getRunOrFail(client, given, dbOf(command));
        if (options.json) printJson(run);
        else {
          const [visits, steps, conversations] = await Promise.all([
            client.listVisits(run.run_id),
            client.listSteps(run.run_id),
            agentConversations(client, run),
          ]);
          println(runReport(run, visits, Date.now(), steps, conversations));
        }
      });
    });
}

/** The most messages a page of listMessages may have. */
const MESSAGES_PAGE = 1000;

/**
 * Each agent node's messages in its current visit, every page of them. A node of a workflow
 * stored before the kind existed, whose agent_type "agent" was an agent of its own, has none.
 */
async function agentConversations(client: Engine, run: RunWithNodes): Promise<AgentConversation[]> {
  const agents = run.nodes.filter((n) => n.agent_type === "agent");
  const read = await Promise.all(
    agents.map(async (node): Promise<AgentConversation | null> => {
      const messages: ConversationMessage[] = [];
      for (let after = -1; ; ) {
        const options = { visit: node.visit, after, limit: MESSAGES_PAGE };
        const page = await client.listMessages(run.run_id, node.node_id, options).catch((e: unknown) => {
          if ((e as { code?: unknown }).code === "not_found") return null;
          throw e;
        });
        if (page === null) return null;
        messages.push(...page.messages);
        if (page.next_after === null) break;
        after = page.next_after;
      }
      return { node_id: node.node_id, messages, waiting: node.state === "IN_REVIEW" };
    }),
  );
  return read.filter((c) => c !== null);
}
