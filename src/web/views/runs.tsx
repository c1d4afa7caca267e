/**
 * The runs, newest first: filtered by status, workflow, a part of the run id, text in input or output
 * a tag and creation time (all in the URL hash), live as events arrive, more on demand; every run
 * the filter matches can be cancelled or retried at once (runs-bulk.tsx).
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api, query } from "../api.js";
import { Badge, ErrorNote, Tags, Time } from "../components.js";
import { elapsed, reasonTone, shortId } from "../format.js";
import { useLiveEvents, useLoad, useNow } from "../hooks.js";
import { href, navigate, type RunsFilter } from "../route.js";
import { type Me, type PendingReview, RUN_STATUSES, type Run, type WorkflowSummary } from "../types.js";
import { BulkBar, type BulkFilter } from "./runs-bulk.js";
import "./runs.css";

const PAGE = 50;
/** The server's bounds on `q` (GET /v1/runs). */
const Q_MIN = 3;
const Q_MAX = 200;

/** The most run ids one GET /v1/reviews?run_ids= takes (the server's bound). */
const RUN_IDS_PER_REQUEST = 100;

/** The pending reviews of these runs, asked 100 runs at a time. */
async function reviewsOf(runIds: readonly string[]): Promise<PendingReview[]> {
  const requests = [];
  for (let i = 0; i < runIds.length; i += RUN_IDS_PER_REQUEST) {
    const ids = runIds.slice(i, i + RUN_IDS_PER_REQUEST).join(",");
    requests.push(api<{ reviews: PendingReview[] }>("GET", `/v1/reviews${query({ run_ids: ids })}`));
  }
  return (await Promise.all(requests)).flatMap((answer) => answer.reviews);
}

/** A datetime-local value as ms since the epoch (local time); undefined when empty or not a time. */
function epochOf(value: string | undefined): number | undefined {
  if (!value) return undefined;
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? ms : undefined;
}

/** The status filter's choice for paused runs (RUNNING ones whose attempts are held). */
const PAUSED = "PAUSED";

/** A tag as the search field and the hash hold it, `name:value`, as the tags filter; undefined when not one. */
function tagOf(tag: string | undefined): Record<string, string> | undefined {
  const at = tag?.indexOf(":") ?? -1;
  return tag && at > 0 ? { [tag.slice(0, at)]: tag.slice(at + 1) } : undefined;
}

export function RunsPage(props: { filter: RunsFilter }) {
  const { status, workflow, id, q, tag, from, to } = props.filter;
  // How many runs to show: a page, plus any the user asked for with "Show more".
  const [limit, setLimit] = useState(PAGE);
  // What the list and the bulk actions both filter by.
  const matching: BulkFilter = {
    // PAUSED is no status (a paused run is RUNNING) but a filter of its own.
    ...(status === PAUSED ? { paused: true } : { status }),
    workflow_id: workflow,
    // Any part of the id: the list shows its end (a UUIDv7's start is a timestamp, alike in every recent run).
    id_contains: id,
    q: q && q.length >= Q_MIN ? q : undefined,
    tags: tagOf(tag),
    created_after: epochOf(from),
    created_before: epochOf(to),
  };
  const { tags, paused, ...rest } = matching;
  const params = { ...rest, paused: paused ? "true" : undefined, tag: tags ? tag : undefined, limit };
  const runs = useLoad(
    () => api<{ runs: Run[]; next_cursor: string | null }>("GET", `/v1/runs${query(params)}`),
    JSON.stringify(params),
  );
  const workflows = useLoad(() => api<{ workflows: WorkflowSummary[] }>("GET", "/v1/workflows"), "workflows");
  // Bulk actions are an admin's (or anyone's, on an API without tokens).
  const me = useLoad(() => api<Me>("GET", "/v1/me"), "me");
  const mayAct = me.data !== undefined && (me.data.role === "admin" || me.data.role === null);
  // The waiting reviews of the runs shown only: the inbox may hold thousands.
  const shownIds = (runs.data?.runs ?? []).map((r) => r.run_id);
  const reviews = useLoad(() => reviewsOf(shownIds), `reviews ${shownIds.join(",")}`);
  const now = useNow();
  // Any event may start, end or change a run: reload the list (reloads fold together while one runs).
  useLiveEvents((event) => {
    if (event === null || event.type.startsWith("run.") || event.type.startsWith("compensation.")) runs.reload();
    if (event === null || event.type.startsWith("review.")) reviews.reload();
  });
  const waiting = new Map<string, number>();
  for (const r of reviews.data ?? []) waiting.set(r.run_id, (waiting.get(r.run_id) ?? 0) + 1);

  const shown = runs.data?.runs ?? [];

  const filter = (change: RunsFilter) => navigate({ page: "runs", ...props.filter, ...change });
  const filtered = Boolean(status || workflow || id || q || tag || from || to);

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
              <option value={PAUSED}>paused</option>
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
      <SearchForm filter={props.filter} onSearch={filter} />
      <ErrorNote error={runs.error} prefix="Could not load the runs" />
      {runs.data && shown.length === 0 && <p class="muted">No runs{filtered ? " match" : " yet"}.</p>}
      {mayAct && runs.data && <BulkBar filter={matching} />}
      {shown.length > 0 && (
        <table class="runs" aria-label="runs">
          <thead>
            <tr>
              <th>Run</th>
              <th>Workflow</th>
              <th>Status</th>
              <th>Waiting reviews</th>
              <th>Error reason</th>
              <th>Started</th>
              <th>Duration</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((run) => (
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
                  <Tags tags={run.tags} />
                </td>
                <td>
                  <Badge state={run.status} />
                  {run.needs_attention && <span class="attention"> needs attention</span>}
                  {run.paused && <span class="attention"> paused</span>}
                </td>
                <td class="reviews-cell">{waiting.get(run.run_id) ?? ""}</td>
                <td class="reason-cell">
                  {run.error && (
                    <span
                      class={`reason ${reasonTone({ state: run.status, reason: run.error.reason, error: run.error })}`}
                      title={run.error.message}
                    >
                      {run.error.reason}
                    </span>
                  )}
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

/** The search fields a filter fills ("" where it has none). */
function fieldsOf(f: Pick<RunsFilter, "id" | "q" | "tag" | "from" | "to">) {
  return { id: f.id ?? "", q: f.q ?? "", tag: f.tag ?? "", from: f.from ?? "", to: f.to ?? "" };
}

/** A part of the run id, text and time range: applied together on submit (the hash changes, so a reload keeps them). */
function SearchForm(props: { filter: RunsFilter; onSearch: (change: RunsFilter) => void }) {
  const { id, q, tag, from, to } = props.filter;
  const inHash = fieldsOf(props.filter);
  const [fields, setFields] = useState(inHash);
  // The hash this form last asked for: its change arrives after the click, maybe after more typing.
  const asked = useRef<string | null>(null);
  // The hash may change under the form (back, a link): show what it says. Not when the change is
  // the form's own search, which would throw away what was typed since.
  useEffect(() => {
    const own = asked.current === JSON.stringify(inHash);
    asked.current = null;
    if (!own) setFields(inHash);
  }, [id, q, tag, from, to]);
  const set = (name: keyof typeof fields) => (e: { currentTarget: HTMLInputElement }) => {
    const typed = e.currentTarget.value;
    setFields((f) => ({ ...f, [name]: typed }));
  };
  const value = (v: string) => v.trim() || undefined;
  // An id copied as the list shows it starts with "…": the part is what follows.
  const idPart = (v: string) => value(v.trim().replace(/^…+/, ""));
  const search = (change: Pick<RunsFilter, "id" | "q" | "tag" | "from" | "to">) => {
    const next = fieldsOf(change);
    // Unchanged, the hash does not change and the effect does not run to forget it.
    if (JSON.stringify(next) !== JSON.stringify(inHash)) asked.current = JSON.stringify(next);
    props.onSearch(change);
  };
  return (
    <search aria-label="search runs">
      <form
        class="run-search"
        onSubmit={(e) => {
          e.preventDefault();
          search({
            id: idPart(fields.id),
            q: value(fields.q),
            tag: value(fields.tag),
            from: value(fields.from),
            to: value(fields.to),
          });
        }}
      >
        <label>
          Run id contains
          <input name="id" value={fields.id} maxLength={200} spellcheck={false} onInput={set("id")} />
        </label>
        <label>
          Text in input or output
          <input
            name="q"
            type="search"
            value={fields.q}
            minLength={Q_MIN}
            maxLength={Q_MAX}
            placeholder={`${Q_MIN} characters or more`}
            onInput={set("q")}
          />
        </label>
        <label>
          Tag
          <input
            name="tag"
            value={fields.tag}
            maxLength={400}
            spellcheck={false}
            placeholder="name:value"
            pattern="[A-Za-z0-9_.:\-]+:.*"
            onInput={set("tag")}
          />
        </label>
        <label>
          Created from
          <input name="from" type="datetime-local" step="1" value={fields.from} onInput={set("from")} />
        </label>
        <label>
          to
          <input name="to" type="datetime-local" step="1" value={fields.to} onInput={set("to")} />
        </label>
        <button type="submit" class="primary">
          Search
        </button>
        <button
          type="button"
          onClick={() => {
            setFields(fieldsOf({}));
            search({ id: undefined, q: undefined, tag: undefined, from: undefined, to: undefined });
          }}
        >
          Clear
        </button>
      </form>
    </search>
  );
}
