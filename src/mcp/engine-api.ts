/**
 * The MCP server's SkeinApi over an `Engine` (a client on the database, as the other `skein`
 * commands open it): each method one or two engine calls, paged as the HTTP API pages.
 */
import type { Json } from "../core/types.js";
import { graphModel, renderMermaid } from "../definition/mermaid.js";
import { validateWorkflow } from "../definition/validate.js";
import type { Engine } from "../engine/engine.js";
import type { EventsPage, RunsPage, RunsQuery, SkeinApi } from "./skein-api.js";

export function engineApi(engine: Engine): SkeinApi {
  return {
    listWorkflows: () => engine.listWorkflows(),

    async listRuns(query: RunsQuery): Promise<RunsPage> {
      // One more than the page: whether there is a next one. The cursor is the page's last run_id.
      const runs = await engine.listRuns({
        limit: query.limit + 1,
        ...(query.status === undefined ? {} : { status: query.status }),
        ...(query.workflow_id === undefined ? {} : { workflow_id: query.workflow_id }),
        ...(query.q === undefined ? {} : { q: query.q }),
        ...(query.id_contains === undefined ? {} : { id_contains: query.id_contains }),
        ...(query.paused === undefined ? {} : { paused: query.paused }),
        ...(query.cursor === undefined ? {} : { before: query.cursor }),
      });
      const page = runs.slice(0, query.limit);
      const last = page[page.length - 1];
      return { runs: page, next_cursor: runs.length > query.limit && last ? last.run_id : null };
    },

    getRun: (runId) => engine.getRun(runId),

    async graph(runId: string): Promise<string> {
      const run = await engine.getRun(runId);
      const workflow = await engine.getWorkflow(run.workflow_id, run.workflow_version);
      const checked = validateWorkflow(workflow.definition);
      if (!checked.ok) throw new Error(`stored workflow ${run.workflow_id} v${run.workflow_version} does not validate`);
      return renderMermaid(graphModel(checked.graph, { nodes: run.nodes, visits: await engine.listVisits(runId) }));
    },

    async listEvents(runId, { after_seq, limit }): Promise<EventsPage> {
      const events = await engine.listEvents(runId, {
        limit,
        ...(after_seq === undefined ? {} : { afterSeq: after_seq }),
      });
      // Every run has a run.started event: an empty first page may be an unknown run (NotFoundError).
      if (events.length === 0 && after_seq === undefined) await engine.getRun(runId);
      const last = events[events.length - 1];
      return { events, next_after_seq: events.length === limit && last ? last.seq : null };
    },

    listReviews: (runIds) => engine.listReviews({ status: "pending", ...(runIds === undefined ? {} : { runIds }) }),

    startRun: (workflowId, options) => engine.startRun(workflowId, options),

    review: (runId, nodeId, decision) => engine.review(runId, nodeId, decision),

    sendEvent: (runId, name, payload: Json, options) => engine.sendEvent(runId, name, payload, options),

    cancelRun: (runId, options) => engine.cancelRun(runId, options),

    retryRun: (runId, options) => engine.retryRun(runId, options),

    close: () => engine.close(),
  };
}
