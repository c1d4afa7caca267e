/**
 * Bulk actions of the runs list (DESIGN §16): cancel, retry, pause, resume or fork every run the CURRENT FILTER
 * matches, not the rows of one page. The bar shows how many runs each action would apply to (a
 * dry run of POST /v1/runs/bulk, counted up to COUNT_CAP); the dialog repeats it, then applies
 * it to at most APPLY_CAP runs a confirmation, and says how many were done, which were refused
 * and why, and whether more runs still match (confirm again to go on).
 */
import { useState } from "preact/hooks";
import { api, messageOf } from "../api.js";
import { ConfirmDialog, ErrorNote } from "../components.js";
import { shortId } from "../format.js";
import { useLiveEvents, useLoad } from "../hooks.js";
import type { Workflow } from "../types.js";

export type BulkAction = "cancel" | "retry" | "pause" | "resume" | "fork";

/** The filter of POST /v1/runs/bulk, as the list's filter gives it. */
export interface BulkFilter {
  status?: string;
  /** Only paused runs (the status filter's "paused"). */
  paused?: boolean;
  workflow_id?: string;
  id_contains?: string;
  q?: string;
  tags?: Record<string, string>;
  created_after?: number;
  created_before?: number;
}

interface BulkAnswer {
  matched: number;
  applied: number;
  refused: { run_id: string; reason: string }[];
  more: boolean;
  dry_run: boolean;
  run_ids: string[];
}

/** Runs a count reads at most (the server's cap); past it the bar says "10,000+". */
const COUNT_CAP = 10_000;
/** Runs one confirmation acts on at most (the server's default cap). */
const APPLY_CAP = 1000;

const VERB: Record<BulkAction, string> = {
  cancel: "Cancel",
  retry: "Retry",
  pause: "Pause",
  resume: "Resume",
  fork: "Fork",
};
const DONE: Record<BulkAction, string> = {
  cancel: "cancelled",
  retry: "retried",
  pause: "paused",
  resume: "resumed",
  fork: "forked",
};
/** What an action does to the runs it applies to, as its dialog says it. */
const WHAT: Record<BulkAction, string> = {
  cancel:
    "Every RUNNING run the filter matches: their active nodes are cancelled and late results ignored; each can be retried later. Runs started by another run follow it.",
  retry:
    "Every FAILED or CANCELLED run the filter matches runs again what failed or was cancelled, and everything downstream. Runs started by another run follow it.",
  pause:
    "Every RUNNING run the filter matches that is not paused, child runs included: none of their attempts starts until they are resumed; running ones finish.",
  resume: "Every paused run the filter matches, child runs included: their ready nodes start.",
  fork: "Every run the filter matches, finished or running, gets a fork: a new run that keeps what it did before the node chosen below and runs that node and what follows again. The runs themselves are not changed.",
};

/** `from`: the node a fork runs again from (the fork action only). */
function bulk(filter: BulkFilter, action: BulkAction, options: { dry_run: boolean; cap: number }, from?: string) {
  const body = { kind: action, ...(action === "fork" ? { from } : {}) };
  return api<BulkAnswer>("POST", "/v1/runs/bulk", { filter, action: body, ...options });
}

/** The node ids of the filter's workflow (its latest version), which a fork may run again from; [] without one. */
function useForkNodes(workflowId: string | undefined): string[] {
  const workflow = useLoad(
    () =>
      workflowId === undefined
        ? Promise.resolve(undefined)
        : api<Workflow>("GET", `/v1/workflows/${encodeURIComponent(workflowId)}`),
    workflowId ?? "",
  );
  const nodes = (workflow.data?.definition as { nodes?: { node_id: string }[] } | undefined)?.nodes ?? [];
  return nodes.map((n) => n.node_id);
}

/** "1,234 matching runs" (or "10,000+"). */
function matching(count: BulkAnswer): string {
  const n = `${count.matched.toLocaleString("en-US")}${count.more ? "+" : ""}`;
  return `${n} matching run${count.matched === 1 && !count.more ? "" : "s"}`;
}

/**
 * The bar over the list: per action, the count of runs the filter matches that it applies to, and
 * its button. The counts follow the runs as events start, end or change them.
 */
export function BulkBar(props: { filter: BulkFilter }) {
  // Forking many runs needs one workflow's nodes to choose from: offered once the filter names it.
  const forkNodes = useForkNodes(props.filter.workflow_id);
  const actions: BulkAction[] = [
    "cancel",
    "retry",
    "pause",
    "resume",
    ...(forkNodes.length > 0 ? ["fork" as const] : []),
  ];
  const counts = useLoad(
    () =>
      Promise.all(actions.map((action) => bulk(props.filter, action, { dry_run: true, cap: COUNT_CAP }, forkNodes[0]))),
    `${JSON.stringify(props.filter)} ${forkNodes[0] ?? ""}`,
  );
  useLiveEvents((event) => {
    if (event === null || event.type.startsWith("run.")) counts.reload();
  });
  const [open, setOpen] = useState<BulkAction | null>(null);
  const count = (action: BulkAction) => counts.data?.[actions.indexOf(action)];
  const button = (action: BulkAction, n: BulkAnswer | undefined) => (
    <button
      key={action}
      type="button"
      class={action === "cancel" ? "danger" : ""}
      disabled={!n || n.matched === 0}
      onClick={() => setOpen(action)}
    >
      {VERB[action]} {n ? matching(n) : "matching runs"}…
    </button>
  );
  const current = open ? count(open) : undefined;
  return (
    <section class="bulk-bar" aria-label="act on every matching run">
      <span class="muted">Every run the filter matches, on every page:</span>
      {actions.map((action) => button(action, count(action)))}
      <ErrorNote error={counts.error} prefix="Could not count the matching runs" />
      {open && current && (
        <BulkDialog
          action={open}
          filter={props.filter}
          count={current}
          forkNodes={forkNodes}
          onClose={() => setOpen(null)}
          onDone={counts.reload}
        />
      )}
    </section>
  );
}

function BulkDialog(props: {
  action: BulkAction;
  filter: BulkFilter;
  count: BulkAnswer;
  forkNodes: string[];
  onClose: () => void;
  onDone: () => void;
}) {
  const { action, count } = props;
  const [from, setFrom] = useState(props.forkNodes[0] ?? "");
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<BulkAnswer | null>(null);
  const [error, setError] = useState<string | null>(null);
  const confirm = async () => {
    setBusy(true);
    setError(null);
    try {
      const answer = await bulk(props.filter, action, { dry_run: false, cap: APPLY_CAP }, from);
      props.onDone();
      if (answer.refused.length === 0 && !answer.more) props.onClose();
      else setResult(answer);
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setBusy(false);
    }
  };
  const verb = VERB[action];
  const capped = count.matched > APPLY_CAP || count.more;
  return (
    <ConfirmDialog
      title={`${verb} ${matching(count)}?`}
      confirmLabel={
        capped
          ? `${verb} ${APPLY_CAP.toLocaleString("en-US")} of them`
          : `${verb} ${matching(count).replace(" matching", "")}`
      }
      danger={action === "cancel"}
      busy={busy || count.matched === 0}
      onConfirm={() => void confirm()}
      onClose={props.onClose}
    >
      <p>{WHAT[action]}</p>
      {action === "fork" && (
        <label class="field">
          From node
          <select name="from" value={from} onChange={(e) => setFrom(e.currentTarget.value)}>
            {props.forkNodes.map((id) => (
              <option key={id} value={id}>
                {id}
              </option>
            ))}
          </select>
        </label>
      )}
      {capped && (
        <p>
          At most {APPLY_CAP.toLocaleString("en-US")} runs are {DONE[action]} at a time: confirm again for the rest.
        </p>
      )}
      <p class="muted">
        For example{" "}
        {count.run_ids.slice(0, 5).map((id, i) => (
          <span key={id}>
            {i > 0 && ", "}
            <code title={id}>{shortId(id)}</code>
          </span>
        ))}
        .
      </p>
      {error && (
        <div class="error-note" role="alert">
          {error}
        </div>
      )}
      {result && (
        <div class={result.refused.length > 0 ? "error-note" : "note"} role="status" aria-label="bulk result">
          <p>
            {result.applied.toLocaleString("en-US")} {DONE[action]}
            {result.refused.length > 0 ? `; ${result.refused.length} refused:` : "."}
            {result.more ? " More runs match: confirm again to go on." : ""}
          </p>
          {result.refused.length > 0 && (
            <ul aria-label="refused runs">
              {result.refused.map((r) => (
                <li key={r.run_id}>
                  <code title={r.run_id}>{shortId(r.run_id)}</code>: {r.reason}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </ConfirmDialog>
  );
}
