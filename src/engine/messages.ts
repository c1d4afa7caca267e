/** Reading an agent node's conversation (DESIGN §14.2), a page at a time: GET .../messages. */
import { type ConversationMessage, conversationOf } from "../calls/agent/messages.js";
import { agent as agentKind } from "../definition/kinds/agent.js";
import { NotFoundError } from "../errors.js";
import type { Store } from "../store/store.js";
import { refuseNul } from "./identifiers.js";
import { checkPaging } from "./paging.js";
import type { WorkflowRegistry } from "./registry.js";

export type { ConversationMessage };

export interface ListMessagesOptions {
  /** The visit of the node (default: its current visit). */
  visit?: number;
  /** Messages after this seq (exclusive); default -1, from the first. */
  after?: number;
  /** At most this many (default 100, at most 1000). */
  limit?: number;
}

export interface MessagePage {
  /** The visit read. */
  visit: number | null;
  messages: ConversationMessage[];
  /** Pass as `after` for the next page; null on the last. */
  next_after: number | null;
}

const DEFAULT_LIMIT = 100;
/** The most messages one page may have. */
export const MESSAGES_MAX_LIMIT = 1000;

/**
 * A page of an agent node's conversation in one visit: its instructions and input, then each
 * model turn and tool call as the loop recorded it.
 * @throws ValidationError for a bad visit, after or limit; NotFoundError for an unknown run, or a
 *   node that is not one of its workflow's agent nodes
 */
export async function listMessages(
  store: Store,
  registry: WorkflowRegistry,
  runId: string,
  nodeId: string,
  options: ListMessagesOptions = {},
): Promise<MessagePage> {
  refuseNul({ run_id: runId, node_id: nodeId });
  const after = options.after ?? -1;
  const limit = options.limit ?? DEFAULT_LIMIT;
  checkPaging(
    "listMessages",
    { visit: options.visit, after, limit },
    { after: "a message's seq", things: "messages", maxLimit: MESSAGES_MAX_LIMIT },
  );
  const run = await store.getRun(runId);
  if (!run) throw new NotFoundError(`run ${runId} does not exist; check the run id and the database`);
  const { graph } = await registry.get(run.workflow_id, run.workflow_version);
  if (graph.nodes.get(nodeId)?.kind !== agentKind) {
    const agents = [...graph.nodes.values()].filter((n) => n.kind === agentKind).map((n) => n.id);
    const which = agents.length === 0 ? "it has none" : `its agent nodes are ${agents.join(", ")}`;
    throw new NotFoundError(
      `workflow ${run.workflow_id} v${run.workflow_version} of run ${runId} has no agent node "${nodeId}": ${which}`,
    );
  }
  const visits = (await store.listVisits(runId)).filter((v) => v.node_id === nodeId);
  const visit = options.visit === undefined ? visits.reduce((m, v) => Math.max(m, v.visit), 0) : options.visit;
  const read = visits.find((v) => v.visit === visit);
  if (!read) return { visit: null, messages: [], next_after: null };
  const steps = (await store.runSteps(runId, nodeId)).filter((s) => s.visit === visit);
  const all = conversationOf(read.payload, steps);
  const messages = all.filter((m) => m.seq > after).slice(0, limit);
  const last = messages[messages.length - 1];
  return { visit, messages, next_after: last && all.length > last.seq + 1 ? last.seq : null };
}
