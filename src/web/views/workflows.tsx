/** Registered workflows and their versions; one workflow's run form and definition editor; a new workflow. */
import { useState } from "preact/hooks";
import { api } from "../api.js";
import { ErrorNote, Time } from "../components.js";
import { useLoad } from "../hooks.js";
import { href, navigate } from "../route.js";
import type { Registered, Trigger, Workflow, WorkflowSummary } from "../types.js";
import { Editor } from "./editor.js";
import { StartRunForm } from "./start-run.js";
import { UpgradeRuns } from "./upgrade-runs.js";

/** What "New workflow" starts from: valid, and showing the main fields. */
const TEMPLATE = {
  id: "my-workflow",
  description: "What this workflow does",
  input_schema: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
  nodes: [
    { node_id: "draft", agent_type: "writer", payload: { topic: "{{ input.topic }}" } },
    {
      node_id: "check",
      agent_type: "human_review",
      depends_on: ["draft"],
      payload: { title: "Publish the draft about {{ input.topic }}?", data: "{{ nodes.draft.output }}" },
      next_on_success: "publish",
      next_on_failure: "rework",
    },
    { node_id: "publish", agent_type: "publisher" },
    { node_id: "rework", agent_type: "writer" },
  ],
};

/**
 * The list beside one workflow, or beside a new one (`creating`). One component for both, so the
 * note of a save survives the move from the new workflow to the version it became.
 */
export function WorkflowsPage(props: {
  workflowId?: string | undefined;
  version?: number | undefined;
  creating?: boolean;
}) {
  const list = useLoad(() => api<{ workflows: WorkflowSummary[] }>("GET", "/v1/workflows"), "workflows");
  const [lastSaved, setLastSaved] = useState<Registered | null>(null);
  const saved = (r: Registered) => {
    setLastSaved(r);
    list.reload();
    navigate({ page: "workflows", workflowId: r.id, version: r.version });
  };
  const latest = list.data?.workflows.find((w) => w.id === props.workflowId);
  const showSaved = lastSaved !== null && !props.creating && lastSaved.id === props.workflowId;
  return (
    <section class="workflows-page">
      <header class="page-header">
        <h2>Workflows</h2>
        <a class="button" href={href({ page: "new-workflow" })}>
          New workflow
        </a>
      </header>
      <ErrorNote error={list.error} prefix="Could not load the workflows" />
      <div class="two-columns wide-right">
        <nav aria-label="workflows">
          {list.data && list.data.workflows.length === 0 && <p class="muted">No workflows yet.</p>}
          <ul class="workflow-list">
            {(list.data?.workflows ?? []).map((w) => (
              <li key={w.id} class={w.id === props.workflowId ? "selected" : ""}>
                <a href={href({ page: "workflows", workflowId: w.id })}>{w.id}</a>{" "}
                <span class="muted">
                  v{w.version}, <Time at={w.created_at} />
                </span>
              </li>
            ))}
          </ul>
        </nav>
        <div>
          {showSaved && (
            <p role="status" class="saved">
              {lastSaved.created
                ? `Saved ${lastSaved.id} as version ${lastSaved.version}.`
                : `No change: this is already ${lastSaved.id} version ${lastSaved.version}.`}
              {lastSaved.upgradable.active > 0 &&
                ` ${lastSaved.upgradable.compatible} of the ${lastSaved.upgradable.checked} running runs of older versions checked could move to it (Upgrade runs).`}
            </p>
          )}
          {props.creating ? (
            <div class="workflow-detail">
              <h3>New workflow</h3>
              <Editor initial={JSON.stringify(TEMPLATE, null, 2)} onSaved={saved} />
            </div>
          ) : props.workflowId === undefined ? (
            <p class="muted">Choose a workflow to start a run or edit it, or make a new one.</p>
          ) : (
            <WorkflowDetail
              key={`${props.workflowId}@${props.version ?? "latest"}`}
              id={props.workflowId}
              version={props.version}
              latestVersion={latest?.version}
              onSaved={saved}
            />
          )}
        </div>
      </div>
    </section>
  );
}

function WorkflowDetail(props: {
  id: string;
  version: number | undefined;
  latestVersion: number | undefined;
  onSaved: (r: Registered) => void;
}) {
  const workflow = useLoad(
    () =>
      api<Workflow>(
        "GET",
        `/v1/workflows/${encodeURIComponent(props.id)}${props.version ? `?version=${props.version}` : ""}`,
      ),
    `${props.id}@${props.version}`,
  );
  const w = workflow.data;
  const latest = props.latestVersion ?? w?.version ?? 1;
  if (!w) return <ErrorNote error={workflow.error} prefix="Could not load the workflow" />;
  // The editor edits the content: the version is the server's to assign when it is saved.
  const { version: _version, ...content } = w.definition as Record<string, unknown>;
  return (
    <div class="workflow-detail">
      <h3>
        {w.id}{" "}
        <select
          name="version"
          aria-label="version"
          value={String(w.version)}
          onChange={(e) => navigate({ page: "workflows", workflowId: w.id, version: Number(e.currentTarget.value) })}
        >
          {Array.from({ length: latest }, (_, i) => latest - i).map((v) => (
            <option key={v} value={String(v)}>
              version {v}
              {v === latest ? " (latest)" : ""}
            </option>
          ))}
        </select>{" "}
        <a href={href({ page: "runs", workflow: w.id })}>its runs</a>
      </h3>
      {typeof content.description === "string" && <p class="description">{content.description}</p>}
      <details class="panel" open>
        <summary>Start a run</summary>
        <StartRunForm workflowId={w.id} latestVersion={latest} definition={w.definition} />
      </details>
      {Array.isArray(content.triggers) && content.triggers.length > 0 && (
        <Triggers triggers={content.triggers as Trigger[]} />
      )}
      {w.version > 1 && (
        <details class="panel">
          <summary>Upgrade runs</summary>
          <UpgradeRuns workflowId={w.id} version={w.version} />
        </details>
      )}
      <details class="panel" open>
        <summary>Edit, then save as a new version</summary>
        <Editor initial={JSON.stringify(content, null, 2)} onSaved={props.onSaved} />
      </details>
    </div>
  );
}

/** The events that start a run of this version (publishEvent, POST /v1/events): the first trigger that matches an event makes the run. */
function Triggers(props: { triggers: Trigger[] }) {
  return (
    <details class="panel triggers" open>
      <summary>Triggers</summary>
      <p class="muted">
        Publishing one of these events starts a run of the latest version, once per event idempotency key, with the
        first trigger that matches.
      </p>
      <table aria-label="triggers">
        <thead>
          <tr>
            <th>Event</th>
            <th>Key</th>
            <th>Input</th>
          </tr>
        </thead>
        <tbody>
          {props.triggers.map((t, i) => (
            // Triggers are matched in their order: the index is what names one (triggers[i]).
            <tr key={i} data-trigger={i}>
              <td>
                <code>{t.event}</code>
              </td>
              <td>{t.key === undefined ? <span class="muted">any</span> : <code>{t.key}</code>}</td>
              <td>
                {t.input === undefined ? (
                  <span class="muted">the event's payload</span>
                ) : (
                  <code class="trigger-input">{JSON.stringify(t.input)}</code>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </details>
  );
}
