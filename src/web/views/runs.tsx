/** The runs, newest first: filters by status and workflow, live as events arrive, more on demand. */
import { useState } from "preact/hooks";
import { api, query } from "../api.js";
import { Badge, ErrorNote, Time } from "../components.js";
import { elapsed, shortId } from "../format.js";
import { useLiveEvents, useLoad, useNow } from "../hooks.js";
import { href, navigate } from "../route.js";
import { RUN_STATUSES, type Run, type WorkflowSummary } from "../types.js";

const PAGE = 50;

export function RunsPage(props: { status?: string | undefined; workflow?: string | undefined }) {
  const { status, workflow } = props;
  // How many runs to show: a page, plus any the user asked for with "Show more".
  const [limit, setLimit] = useState(PAGE);
  const runs = useLoad(
    () =>
      api<{ runs: Run[]; next_cursor: string | null }>(
        "GET",
        `/v1/runs${query({ status, workflow_id: workflow, limit })}`,
      ),
    `${status}|${workflow}|${limit}`,
  );
  const workflows = useLoad(() => api<{ workflows: WorkflowSummary[] }>("GET", "/v1/workflows"), "workflows");
  const now = useNow();
  // Any event may start, end or change a run: reload the list (reloads fold together while one runs).
  useLiveEvents((event) => {
    if (event === null || event.type.startsWith("run.") || event.type.startsWith("compensation.")) runs.reload();
  });

  const filter = (change: { status?: string; workflow?: string }) =>
    navigate({ page: "runs", status, workflow, ...change });

  return (
    <section>
      <header class="page-header">
        <h2>Runs</h2>
        <form class="filters" onSubmit={(e) => e.preventDefault()}>
          <label>
            Status{" "}
            <select
              name="status"
              value={status ?? ""}
              onChange={(e) => filter({ status: e.currentTarget.value || undefined })}
            >
              <option value="">any</option>
              {RUN_STATUSES.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </label>
          <label>
            Workflow{" "}
            <select
              name="workflow"
              value={workflow ?? ""}
              onChange={(e) => filter({ workflow: e.currentTarget.value || undefined })}
            >
              <option value="">any</option>
              {(workflows.data?.workflows ?? []).map((w) => (
                <option key={w.id} value={w.id}>
                  {w.id}
                </option>
              ))}
              {workflow && !workflows.data?.workflows.some((w) => w.id === workflow) && (
                <option value={workflow}>{workflow}</option>
              )}
            </select>
          </label>
        </form>
      </header>
      <ErrorNote error={runs.error} prefix="Could not load the runs" />
      {runs.data && runs.data.runs.length === 0 && (
        <p class="muted">No runs{status || workflow ? " match" : " yet"}.</p>
      )}
      {runs.data && runs.data.runs.length > 0 && (
        <table class="runs" aria-label="runs">
          <thead>
            <tr>
              <th>Run</th>
              <th>Workflow</th>
              <th>Status</th>
              <th>Started</th>
              <th>Duration</th>
            </tr>
          </thead>
          <tbody>
            {runs.data.runs.map((run) => (
              <tr key={run.run_id} data-run-id={run.run_id} data-status={run.status}>
                <td>
                  <a href={href({ page: "run", runId: run.run_id })} title={run.run_id}>
                    <code>{shortId(run.run_id)}</code>
                  </a>
                </td>
                <td>
                  <a href={href({ page: "workflows", workflowId: run.workflow_id, version: run.workflow_version })}>
                    {run.workflow_id}
                  </a>{" "}
                  <span class="muted">v{run.workflow_version}</span>
                </td>
                <td>
                  <Badge state={run.status} />
                  {run.needs_attention && <span class="attention"> needs attention</span>}
                </td>
                <td>
                  <Time at={run.created_at} />
                </td>
                <td>{elapsed(run.created_at, run.ended_at, now)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {runs.data?.next_cursor && limit < 1000 && (
        <button type="button" onClick={() => setLimit(Math.min(1000, limit + PAGE))}>
          Show more
        </button>
      )}
    </section>
  );
}
