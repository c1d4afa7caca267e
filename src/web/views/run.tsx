/**
 * One run: its graph (nodes coloured by state, the path taken bold, skipped branches faded),
 * its nodes, and the selected node's attempts, payload, output, error and events. The run's
 * event stream (replayed from the start, then live) both fills the history and triggers a
 * reload of the run, so the graph changes as the run moves, without reloading the page.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../api.js";
import { Badge, ErrorNote, JsonBlock, Tags, Time } from "../components.js";
import { elapsed, reasonTone, usageText, wakesAt } from "../format.js";
import { GraphView } from "../graph/graph-view.js";
import { workflowGraph } from "../graph/model.js";
import { useLoad, useNow } from "../hooks.js";
import { href, navigate } from "../route.js";
import { openStream } from "../stream.js";
import { RunTimeline } from "../timeline/timeline-view.js";
import {
  DEFAULT_PRIORITY,
  type ProgressEvent,
  type RunEvent,
  type RunWithNodes,
  type Visit,
  type Workflow,
} from "../types.js";
import { EventTable, NodeDetails } from "./node-details.js";
import { CancelDialog, FailNodeDialog, ForkDialog, PauseDialog, RetryDialog } from "./run-actions.js";
import { awaitedEvents, SendEventDialog } from "./send-event.js";

export function RunPage(props: { runId: string; node?: string | undefined }) {
  const { runId } = props;
  const run = useLoad(() => api<RunWithNodes>("GET", `/v1/runs/${encodeURIComponent(runId)}`), runId);
  const data = run.data;
  const version = data ? `${data.workflow_id}@${data.workflow_version}` : "";
  const workflow = useLoad(
    () =>
      data
        ? api<Workflow>("GET", `/v1/workflows/${encodeURIComponent(data.workflow_id)}?version=${data.workflow_version}`)
        : Promise.resolve(undefined),
    version,
  );
  const { events, progress } = useRunEvents(runId, run.reload);
  useMapProgress(data, run.reload);
  const now = useNow();
  const [dialog, setDialog] = useState<"cancel" | "retry" | "event" | "pause" | "fail" | "fork" | null>(null);

  if (!data) {
    return (
      <section>
        <h2>Run</h2>
        <ErrorNote error={run.error} prefix="Could not load the run" />
        {!run.error && <p class="muted">Loading…</p>}
      </section>
    );
  }
  const graph = workflowGraph(workflow.data?.definition, data.nodes);
  const selected = data.nodes.find((n) => n.node_id === props.node);
  // What the selected node's latest attempt streamed: live while it runs, kept after (DESIGN §15).
  const live = selected ? progress[selected.node_id] : undefined;
  const liveProgress =
    selected && live && live.visit === selected.visit && live.data.attempt === selected.attempt ? live : undefined;
  const select = (node: string) => navigate({ page: "run", runId, node });

  return (
    <section class="run-page">
      <header class="page-header">
        <h2>
          Run <code>{data.run_id}</code> <Badge state={data.status} />
          {data.needs_attention && <span class="attention"> needs attention</span>}
          {data.paused && <span class="attention"> paused</span>}
        </h2>
        <Tags tags={data.tags} />
        {data.queued && (
          <p class="queued-note" role="status">
            {data.queued.reason === "debounce" ? (
              <>
                Debounced: it begins <Time at={data.queued.until ?? null} /> unless another start of key{" "}
                <code>{data.key}</code> comes first and moves the window.
              </>
            ) : (
              <>
                Queued since <Time at={data.queued.since} />: it begins when the running run of key{" "}
                <code>{data.key}</code> and those queued before it have ended.
              </>
            )}
          </p>
        )}
        {data.paused && (
          <p class="paused-note" role="status">
            Paused{data.paused.by ? ` by ${data.paused.by}` : ""} <Time at={data.paused.at} />
            {data.paused.reason ? `: ${data.paused.reason}` : ""}.
            {data.paused.node_id && (
              <>
                {" "}
                Node <a href={href({ page: "run", runId, node: data.paused.node_id })}>{data.paused.node_id}</a> ran out
                of retries: resume gives it one more attempt, or fail it to take its failure path.
              </>
            )}
          </p>
        )}
        <div class="actions">
          {awaitedEvents(data).length > 0 && (
            <button type="button" onClick={() => setDialog("event")}>
              Send event…
            </button>
          )}
          {data.status === "RUNNING" && (
            <button type="button" class={data.paused ? "primary" : ""} onClick={() => setDialog("pause")}>
              {data.paused ? "Resume run…" : "Pause run…"}
            </button>
          )}
          {(data.status === "RUNNING" || data.status === "QUEUED") && (
            <button type="button" class="danger" onClick={() => setDialog("cancel")}>
              Cancel run…
            </button>
          )}
          {(data.status === "FAILED" || data.status === "CANCELLED") && (
            <button type="button" class="primary" onClick={() => setDialog("retry")}>
              Retry run…
            </button>
          )}
        </div>
      </header>
      <ErrorNote error={run.error} prefix="Could not refresh the run" />
      <dl class="facts">
        <dt>Workflow</dt>
        <dd>
          <a href={href({ page: "workflows", workflowId: data.workflow_id, version: data.workflow_version })}>
            {data.workflow_id}
          </a>{" "}
          v{data.workflow_version}
        </dd>
        {data.priority !== undefined && data.priority !== DEFAULT_PRIORITY && (
          <>
            <dt>Priority</dt>
            <dd class="priority">
              {data.priority} <span class="muted">(0 claimed first, 9 last; default {DEFAULT_PRIORITY})</span>
            </dd>
          </>
        )}
        {data.parent && (
          <>
            <dt>Parent run</dt>
            <dd>
              <a href={href({ page: "run", runId: data.parent.run_id, node: data.parent.node_id })}>
                {data.parent.run_id}
              </a>{" "}
              (node {data.parent.node_id}, visit {data.parent.visit}, attempt {data.parent.attempt}
              {data.parent.item === undefined ? "" : `, item ${data.parent.item}`})
            </dd>
          </>
        )}
        {data.forked_from && (
          <>
            <dt>Forked from</dt>
            <dd class="forked-from">
              <a href={href({ page: "run", runId: data.forked_from.run_id, node: data.forked_from.node_id })}>
                {data.forked_from.run_id}
              </a>{" "}
              (from node {data.forked_from.node_id})
            </dd>
          </>
        )}
        {data.triggered_by && (
          <>
            <dt>Triggered by</dt>
            <dd class="triggered-by">
              event <code>{data.triggered_by.event}</code>, key <code>{data.triggered_by.key}</code>
              {data.triggered_by.idempotency_key !== data.triggered_by.event_id && (
                <>
                  , idempotency key <code>{data.triggered_by.idempotency_key}</code>
                </>
              )}
            </dd>
          </>
        )}
        {data.schedule_id && (
          <>
            <dt>Schedule</dt>
            <dd>
              <a href={href({ page: "schedules", scheduleId: data.schedule_id })}>{data.schedule_id}</a>
            </dd>
          </>
        )}
        {usageText(data) && (
          <>
            <dt>Usage</dt>
            <dd class="usage">{usageText(data)}</dd>
          </>
        )}
        <dt>Started</dt>
        <dd>
          <Time at={data.created_at} />
        </dd>
        <dt>Duration</dt>
        <dd>{elapsed(data.created_at, data.ended_at, now)}</dd>
        <dt>Ended</dt>
        <dd>
          <Time at={data.ended_at} />
          {data.ended_at !== null && data.end_cause ? ` (${data.end_cause})` : ""}
        </dd>
        <dt>Waiting reviews</dt>
        <dd>{data.waiting_reviews}</dd>
        <dt>Trace id</dt>
        <dd>
          <code>{data.trace_id}</code>
        </dd>
      </dl>
      {data.error && (
        <div class="error-note" role="alert">
          <p>
            {data.error.reason}: {data.error.message}
          </p>
        </div>
      )}

      <div class="run-layout">
        {/* The timeline under the graph, beside the node's details: both in the first screen. */}
        <div class="run-main">
          <section class="graph-panel" aria-label="run graph">
            <ErrorNote error={workflow.error} prefix="Could not load the workflow" />
            <GraphView graph={graph} selected={props.node} onSelect={select} />
            <p class="legend muted">
              Bold edges: the path taken. Dashed: loop-backs. Faded nodes: skipped. Select a node for its details.
            </p>
          </section>
          <RunTimeline
            events={events}
            visits={data.nodes}
            runStart={data.created_at}
            runEnd={data.ended_at}
            now={now}
            selected={props.node}
            onSelect={select}
          />
        </div>
        <div class="details-panel">
          {selected && data.status === "RUNNING" && waitsForAttempt(selected) && (
            <div class="actions">
              <button type="button" class="danger" onClick={() => setDialog("fail")}>
                Fail this node…
              </button>
            </div>
          )}
          {selected ? (
            <NodeDetails
              visit={selected}
              events={events.filter((e) => e.node_id === selected.node_id)}
              children={(data.children ?? []).filter((c) => c.node_id === selected.node_id)}
              progress={liveProgress}
              now={now}
              // A child run or map item is forked through its root (the server refuses it).
              onFork={data.parent ? undefined : () => setDialog("fork")}
            />
          ) : (
            <p class="muted">Select a node in the graph or the table for its attempts, payload, output and events.</p>
          )}
        </div>
      </div>

      <h3>Nodes</h3>
      <table class="nodes" aria-label="nodes">
        <thead>
          <tr>
            <th>Node</th>
            <th>State</th>
            <th>Visit</th>
            <th>Attempts</th>
            <th>Started</th>
            <th>Time</th>
            <th>Reason / error</th>
          </tr>
        </thead>
        <tbody>
          {data.nodes.map((v) => (
            <tr key={v.node_id} class={v.node_id === props.node ? "selected" : ""}>
              <td>
                <a href={href({ page: "run", runId, node: v.node_id })}>{v.node_id}</a>
              </td>
              <td>
                <Badge state={v.state} />
                <WakesAt visit={v} />
              </td>
              <td>{v.visit}</td>
              <td>{v.attempt}</td>
              <td>
                <Time at={v.started_at} />
              </td>
              <td>{elapsed(v.started_at, v.ended_at, now)}</td>
              {v.waiting && !v.error && v.reason === null ? (
                // A ready node held back says why (getRun's waiting): nothing serves its type is the one to fix.
                <td class={`reason waiting ${v.waiting.reason === "no_agent" ? "danger" : "muted"}`}>
                  {v.waiting.message}
                </td>
              ) : (
                <td class={`reason ${reasonTone(v)}`}>{v.error ? v.error.message : (v.reason ?? "")}</td>
              )}
            </tr>
          ))}
        </tbody>
      </table>

      {data.compensations.length > 0 && (
        <>
          <h3>Compensations</h3>
          <table class="nodes" aria-label="compensations">
            <thead>
              <tr>
                <th>#</th>
                <th>Undoes</th>
                <th>Agent type</th>
                <th>State</th>
                <th>Attempts</th>
                <th>Error</th>
              </tr>
            </thead>
            <tbody>
              {data.compensations.map((c) => (
                <tr key={c.seq}>
                  <td>{c.seq}</td>
                  <td>
                    {c.node_id}#{c.visit}
                  </td>
                  <td>{c.agent_type}</td>
                  <td>
                    <Badge state={c.state} />
                  </td>
                  <td>{c.attempt}</td>
                  <td class="error-cell">{c.error?.message ?? ""}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}

      <h3>Input and output</h3>
      <div class="two-columns">
        <div>
          <h4>Input</h4>
          <JsonBlock value={data.input} />
        </div>
        <div>
          <h4>Output</h4>
          <JsonBlock value={data.output} />
        </div>
      </div>

      <details>
        <summary>History ({events.length} events)</summary>
        <EventTable events={events} />
      </details>

      {dialog === "cancel" && (
        <CancelDialog runId={runId} onClose={() => setDialog(null)} onDone={() => run.reload()} />
      )}
      {dialog === "event" && <SendEventDialog run={data} onClose={() => setDialog(null)} onDone={() => run.reload()} />}
      {dialog === "retry" && <RetryDialog run={data} onClose={() => setDialog(null)} onDone={() => run.reload()} />}
      {dialog === "pause" && <PauseDialog run={data} onClose={() => setDialog(null)} onDone={() => run.reload()} />}
      {dialog === "fail" && selected && (
        <FailNodeDialog
          runId={runId}
          nodeId={selected.node_id}
          onClose={() => setDialog(null)}
          onDone={() => run.reload()}
        />
      )}
      {dialog === "fork" && selected && <ForkDialog run={data} node={selected} onClose={() => setDialog(null)} />}
    </section>
  );
}

/** A sleeping node's wake-up time, beside its state (nothing for other nodes). */
function WakesAt(props: { visit: Visit }) {
  const at = wakesAt(props.visit);
  if (at === null) return null;
  return (
    <span class="wakes-at">
      {" "}
      wakes at <Time at={at} />
    </span>
  );
}

/** How often the run is read again while a map node of it runs. */
const MAP_PROGRESS_MS = 1000;

/**
 * While a map node of the run is RUNNING, reloads the run (its counts) every second: its items
 * start and end without an event of this run (an item of an agent is a row, not a run), as
 * `skein run`'s table does. Reloads fold together while one is in flight (useLoad).
 */
function useMapProgress(run: RunWithNodes | undefined, reload: () => void): void {
  const mapRunning = run?.nodes.some((n) => n.items && n.state === "RUNNING") ?? false;
  useEffect(() => {
    if (!mapRunning) return;
    const timer = setInterval(reload, MAP_PROGRESS_MS);
    return () => clearInterval(timer);
  }, [mapRunning, reload]);
}

/**
 * The run's events: its history replayed, then live ones; each one also reloads the run. And the
 * latest progress of each node (its text so far; replayed with the history, and reloading nothing).
 */
function useRunEvents(
  runId: string,
  onChange: () => void,
): { events: RunEvent[]; progress: Record<string, ProgressEvent> } {
  const events = useRef<RunEvent[]>([]);
  const [, setCount] = useState(0);
  const [progress, setProgress] = useState<Record<string, ProgressEvent>>({});
  const changed = useRef(onChange);
  changed.current = onChange;
  useEffect(() => {
    events.current = [];
    setCount(0);
    setProgress({});
    return openStream({
      runId,
      replay: true,
      onEvent: (event) => {
        events.current.push(event);
        setCount(events.current.length);
        changed.current();
      },
      onProgress: (event) => setProgress((latest) => ({ ...latest, [event.node_id]: event })),
      onOpen: () => changed.current(),
    });
  }, [runId]);
  return { events: events.current, progress };
}

/** A node an operator may fail (DESIGN §16): waiting for an attempt, RETRYING or ready. */
function waitsForAttempt(v: Visit): boolean {
  return v.state === "RETRYING" || (v.state === "PENDING" && v.ready_at != null);
}
