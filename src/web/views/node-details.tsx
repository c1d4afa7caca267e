/** A node's current visit (attempts, ids, timings, payload, output, last error) and its events. */

import { useState } from "preact/hooks";
import { Badge, JsonBlock, LiveText, progressText, Time } from "../components.js";
import { elapsed, reasonTone, wakesAt } from "../format.js";
import { href } from "../route.js";
import type { ChildRun, ProgressEvent, RunEvent, Visit } from "../types.js";
import { Conversation } from "./conversation.js";
import { MapItems } from "./map-items.js";
import { Steps } from "./steps.js";

/** The agent_type of the agent node kind (DESIGN §14.2): a tool-calling loop whose conversation is shown. */
const AGENT = "agent";

/** What the node waits for, in words: what getRun says holds it (an agent nothing serves, a rate limit, priority), an event, or its wake-up time. */
function waitingFor(v: Visit): string | null {
  if (v.waiting) return v.waiting.message;
  if (v.state !== "WAITING") return null;
  const p = (v.payload ?? {}) as { event?: unknown; key?: unknown };
  if (typeof p.event !== "string") return "the time it wakes (a sleep)";
  const key = typeof p.key === "string" ? ` (key ${p.key})` : "";
  return `event "${p.event}"${key}, until its deadline`;
}

export function NodeDetails(props: {
  visit: Visit;
  events: RunEvent[];
  children?: ChildRun[];
  /** What the visit's latest attempt streamed (its text so far, or its latest value), if anything. */
  progress?: ProgressEvent | undefined;
  now: number;
  /** Opens the fork dialog from this node; absent where a run cannot be forked (a child run). */
  onFork?: (() => void) | undefined;
}) {
  const { visit: v, events, now } = props;
  const children = props.children ?? [];
  return (
    <article class="node-details" aria-label={`node ${v.node_id}`}>
      <h3>
        <span class="node-name">{v.node_id}</span> <Badge state={v.state} />
        {props.onFork && (
          <button type="button" class="fork-from" onClick={props.onFork}>
            Fork from here…
          </button>
        )}
      </h3>
      <dl class="facts">
        <dt>Agent type</dt>
        <dd>{v.agent_type}</dd>
        <dt>Visit</dt>
        <dd>{v.visit}</dd>
        <dt>Attempts</dt>
        <dd>
          {v.attempt}
          {v.failures > 0 ? ` (${v.failures} failed)` : ""}
        </dd>
        <dt>execution_id</dt>
        <dd>
          <code class="execution-id">{v.execution_id}</code>
        </dd>
        <dt>Held by</dt>
        <dd>{v.holder ?? "-"}</dd>
        {waitingFor(v) !== null && (
          <>
            <dt>Waiting for</dt>
            <dd class={`waiting-for${v.waiting?.reason === "no_agent" ? " reason danger" : ""}`}>{waitingFor(v)}</dd>
          </>
        )}
        <dt>Created</dt>
        <dd>
          <Time at={v.created_at} />
        </dd>
        <dt>Started</dt>
        <dd>
          <Time at={v.started_at} />
        </dd>
        <dt>Ended</dt>
        <dd>
          <Time at={v.ended_at} />
        </dd>
        <dt>Time</dt>
        <dd>{elapsed(v.started_at, v.ended_at, now)}</dd>
        {v.deadline_at !== null && v.ended_at === null && (
          <>
            {/* A sleep's due time is when it wakes, not a limit it may miss. */}
            <dt>{wakesAt(v) === null ? "Deadline" : "Wakes at"}</dt>
            <dd>
              <Time at={v.deadline_at} />
            </dd>
          </>
        )}
        {v.reason !== null && (
          <>
            <dt>Reason</dt>
            <dd class={`reason ${reasonTone(v)}`}>
              {v.reason}
              {v.handled ? " (handled by next_on_failure)" : ""}
            </dd>
          </>
        )}
        {v.fired !== null && v.fired.length > 0 && (
          <>
            <dt>Went on to</dt>
            <dd>{v.fired.join(", ")}</dd>
          </>
        )}
      </dl>
      {children.length > 0 && (
        <>
          <h4>Child runs</h4>
          <ul class="child-runs" aria-label="child runs">
            {children.map((c) => (
              <li key={c.run_id}>
                <a href={href({ page: "run", runId: c.run_id })}>{c.run_id}</a> {c.workflow_id}, visit {c.visit},
                attempt {c.attempt}: <Badge state={c.status} />
              </li>
            ))}
          </ul>
        </>
      )}
      {/* An agent node's progress is its model's text so far: the conversation shows it in its place. */}
      {props.progress && v.agent_type !== AGENT && <LiveProgress event={props.progress} />}
      {v.items && <MapItems visit={v} counts={v.items} />}
      {v.agent_type === AGENT && <Conversation visit={v} progress={props.progress} />}
      <Steps visit={v} />
      <h4>Payload</h4>
      <JsonBlock value={v.payload} />
      <h4>Output</h4>
      <JsonBlock value={v.output} />
      <h4>Last error</h4>
      {v.error ? (
        <div class="error-note">
          <p>
            <strong>{v.error.reason}</strong>
            {v.error.name ? ` (${v.error.name})` : ""}: <span class="error-message">{v.error.message}</span>
          </p>
          {v.error.details !== undefined && <JsonBlock value={v.error.details} />}
        </div>
      ) : (
        <span class="muted">none</span>
      )}
      <h4>Events</h4>
      <EventTable events={events} />
    </article>
  );
}

/**
 * Events drawn at first, the latest: a long loop's history runs to thousands, and every row is a
 * tree and a time redrawn each second (2,000 rows took seconds to draw and to select a node).
 */
const EVENTS_SHOWN = 100;
/** How many more "Show earlier" adds. */
const EARLIER_STEP = 1000;

/** Events oldest first: when, what, which visit, and their data (a tree, nested objects folded); the latest 100, more on demand. */
export function EventTable(props: { events: RunEvent[] }) {
  const [limit, setLimit] = useState(EVENTS_SHOWN);
  const total = props.events.length;
  if (total === 0) return <p class="muted">No events yet.</p>;
  const earlier = Math.max(0, total - limit);
  const shown = earlier > 0 ? props.events.slice(earlier) : props.events;
  return (
    <div class="table-scroll">
      {earlier > 0 && (
        <p class="events-earlier muted">
          The latest {shown.length} of {total} events.{" "}
          <button type="button" onClick={() => setLimit(limit + EARLIER_STEP)}>
            Show {Math.min(earlier, EARLIER_STEP)} earlier
          </button>
        </p>
      )}
      <table class="events" aria-label="events">
        <thead>
          <tr>
            <th>Time</th>
            <th>Event</th>
            <th>Node</th>
            <th>Data</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((e) => (
            <tr key={e.seq}>
              <td>
                <Time at={e.at} />
              </td>
              <td>{e.type}</td>
              <td>{e.node_id === null ? "" : `${e.node_id}#${e.visit ?? ""}`}</td>
              <td>
                <JsonBlock value={e.data} empty="" openDepth={1} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/**
 * An attempt's latest progress (DESIGN §11.6, §15), kept after it ends: a string or `{ content }`
 * (an llm node's text so far, its deltas joined) whole, anything else as JSON; kept scrolled to
 * its end as it grows. Text only.
 */
function LiveProgress(props: { event: ProgressEvent }) {
  return (
    <>
      <h4>Progress</h4>
      <LiveText text={progressText(props.event.data.progress)} label="progress" />
    </>
  );
}
