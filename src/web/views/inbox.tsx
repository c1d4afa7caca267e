/**
 * Reviews waiting for a person: what to decide, on what data, who may, and how long is left
 * before the review times out (and counts as rejected). A decision made here shows its result
 * at once and stays on the page until dismissed; so does a conflict (someone else, or the
 * timeout, decided first), with the server's reason. An admin decides *as* one of a review's
 * assignees (DESIGN §13), chosen in a select; a reviewer decides as itself.
 */
import { useState } from "preact/hooks";
import { ApiError, api, storedToken } from "../api.js";
import { Badge, ErrorNote, JsonBlock, Time } from "../components.js";
import { duration, text } from "../format.js";
import { useLiveEvents, useLoad, useNow } from "../hooks.js";
import { href } from "../route.js";
import type { Me, PendingReview, Visit } from "../types.js";

type Outcome =
  | { review: PendingReview; kind: "decided"; decision: "approve" | "reject"; visit: Visit }
  | { review: PendingReview; kind: "conflict"; message: string };

/** Events after which the list of pending reviews may differ. */
const CHANGES_REVIEWS = /^(review\.|run\.|node\.(failed|cancelled|skipped|succeeded))/;

export function InboxPage() {
  const reviews = useLoad(() => api<{ reviews: PendingReview[] }>("GET", "/v1/reviews"), "reviews");
  const me = useLoad(() => api<Me>("GET", "/v1/me"), "me");
  const [outcomes, setOutcomes] = useState<Outcome[]>([]);
  const now = useNow();
  useLiveEvents((event) => {
    if (event === null || CHANGES_REVIEWS.test(event.type)) reviews.reload();
  });
  const settled = new Set(outcomes.map((o) => o.review.execution_id));
  const pending = (reviews.data?.reviews ?? []).filter((r) => !settled.has(r.execution_id));
  const settle = (outcome: Outcome) => {
    setOutcomes((list) => [outcome, ...list]);
    reviews.reload();
  };

  return (
    <section>
      <header class="page-header">
        <h2>Inbox</h2>
        <p class="muted">{reviews.data ? `${pending.length} waiting for a decision` : "Loading…"}</p>
      </header>
      <ErrorNote error={reviews.error} prefix="Could not load the reviews" />
      {outcomes.map((o) => (
        <OutcomeCard
          key={o.review.execution_id}
          outcome={o}
          onDismiss={() => setOutcomes((list) => list.filter((x) => x !== o))}
        />
      ))}
      {reviews.data && pending.length === 0 && <p class="muted">Nothing waits for a decision.</p>}
      {pending.map((r) => (
        <ReviewCard key={r.execution_id} review={r} me={me.data ?? null} now={now} onSettled={settle} />
      ))}
    </section>
  );
}

function ReviewCard(props: { review: PendingReview; me: Me | null; now: number; onSettled: (o: Outcome) => void }) {
  const { review: r, now } = props;
  const [comment, setComment] = useState("");
  const [editOutput, setEditOutput] = useState(false);
  const [output, setOutput] = useState(() => JSON.stringify(reviewData(r.data) ?? null, null, 2));
  const [by, setBy] = useState(() => sessionStorage.getItem("skein.by") ?? "");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  // With a token the server decides as the token's name; an open API takes the name given here.
  const open = storedToken() === null;
  const assignees = Array.isArray(r.assignees) ? r.assignees.map(text) : null;
  const outputProblem = editOutput ? jsonProblem(output) : null;
  // An admin decides as one of the assignees: itself when it is one, else the one chosen here.
  const me = props.me;
  const asAssignee = me?.role === "admin" && assignees !== null && assignees.length > 0;
  const [chosen, setChosen] = useState("");
  const decideAs = chosen || (me?.name && assignees?.includes(me.name) ? me.name : "");
  const mustChoose = asAssignee && decideAs === "";

  const decide = async (decision: "approve" | "reject") => {
    setBusy(true);
    setError(null);
    if (open && by.trim()) sessionStorage.setItem("skein.by", by.trim());
    try {
      const visit = await api<Visit>(
        "POST",
        `/v1/runs/${encodeURIComponent(r.run_id)}/nodes/${encodeURIComponent(r.node_id)}/review`,
        {
          decision,
          execution_id: r.execution_id,
          ...(comment.trim() ? { comment: comment.trim() } : {}),
          ...(decision === "approve" && editOutput ? { output: JSON.parse(output) as unknown } : {}),
          ...(open && by.trim() ? { by: by.trim() } : {}),
          ...(asAssignee && decideAs ? { by: decideAs } : {}),
        },
      );
      props.onSettled({ review: r, kind: "decided", decision, visit });
    } catch (e) {
      if (e instanceof ApiError && e.status === 409) {
        props.onSettled({ review: r, kind: "conflict", message: e.message });
        return;
      }
      setError(e);
      setBusy(false);
    }
  };

  const left = r.deadline_at === null ? null : r.deadline_at - now;
  return (
    <article class="card review" data-run-id={r.run_id} data-node-id={r.node_id} aria-label={`review ${r.node_id}`}>
      <h3 class="review-title">{text(r.title) || `Review ${r.node_id}`}</h3>
      <dl class="facts">
        <dt>Run</dt>
        <dd>
          <a href={href({ page: "run", runId: r.run_id, node: r.node_id })}>
            <code>{r.run_id}</code>
          </a>
        </dd>
        <dt>Node</dt>
        <dd>
          {r.node_id} (visit {r.visit})
        </dd>
        <dt>Who may decide</dt>
        <dd class="assignees">{assignees === null ? "anyone" : assignees.join(", ") || "nobody"}</dd>
        <dt>Requested</dt>
        <dd>
          <Time at={r.requested_at} />
        </dd>
        <dt>Time left</dt>
        <dd class="time-left">
          {left === null ? "no timeout" : left > 0 ? duration(left) : "timed out (counts as rejected)"}
        </dd>
      </dl>
      {r.instructions !== null && <p class="instructions">{text(r.instructions)}</p>}
      <h4>Data to review</h4>
      <JsonBlock value={reviewData(r.data)} />
      <form
        class="decision"
        onSubmit={(e) => {
          e.preventDefault();
        }}
      >
        {open && (
          <label class="field">
            Decide as{assignees ? ` (one of: ${assignees.join(", ")})` : ""}
            <input name="by" value={by} onInput={(e) => setBy(e.currentTarget.value)} />
          </label>
        )}
        {asAssignee && (
          <label class="field">
            Decide as (an admin decides for one of the assignees)
            <select name="decide-as" value={decideAs} onChange={(e) => setChosen(e.currentTarget.value)}>
              {decideAs === "" && <option value="">Choose an assignee…</option>}
              {assignees.map((a) => (
                <option key={a} value={a}>
                  {a === me?.name ? `${a} (you)` : a}
                </option>
              ))}
            </select>
          </label>
        )}
        <label class="field">
          Comment
          <textarea name="comment" rows={2} value={comment} onInput={(e) => setComment(e.currentTarget.value)} />
        </label>
        <label class="check">
          <input type="checkbox" checked={editOutput} onChange={(e) => setEditOutput(e.currentTarget.checked)} />{" "}
          Approve with an edited output
        </label>
        {editOutput && (
          <label class="field">
            Output (JSON)
            <textarea
              name="output"
              class="code"
              rows={6}
              spellcheck={false}
              value={output}
              onInput={(e) => setOutput(e.currentTarget.value)}
            />
            {outputProblem && <span class="problem-message">{outputProblem}</span>}
          </label>
        )}
        <div class="actions">
          <button
            type="button"
            class="primary"
            disabled={busy || mustChoose || outputProblem !== null}
            onClick={() => void decide("approve")}
          >
            Approve
          </button>
          <button type="button" class="danger" disabled={busy || mustChoose} onClick={() => void decide("reject")}>
            Reject
          </button>
        </div>
        <ErrorNote error={error} prefix="Not decided" />
      </form>
    </article>
  );
}

function OutcomeCard(props: { outcome: Outcome; onDismiss: () => void }) {
  const { outcome: o } = props;
  const runLink = (
    <a href={href({ page: "run", runId: o.review.run_id, node: o.review.node_id })}>
      <code>{o.review.run_id}</code>
    </a>
  );
  return (
    <article class={`card outcome ${o.kind}`} aria-label={`decision on ${o.review.node_id}`}>
      <h3 class="review-title">{text(o.review.title) || `Review ${o.review.node_id}`}</h3>
      {o.kind === "decided" ? (
        <p role="status">
          {o.decision === "approve" ? "Approved" : "Rejected"}
          {decidedBy(o.visit)}: {o.review.node_id} is now <Badge state={o.visit.state} />. Run {runLink}.
        </p>
      ) : (
        <p role="alert" class="conflict-message">
          Not decided: this review was already decided by someone else, or timed out, before your decision arrived. The
          server said: {o.message}. Run {runLink}.
        </p>
      )}
      <button type="button" onClick={props.onDismiss}>
        Dismiss
      </button>
    </article>
  );
}

/** The payload without the fields shown above it (title, instructions, assignees); null when nothing is left. */
function reviewData(data: unknown): unknown {
  if (typeof data !== "object" || data === null || Array.isArray(data)) return data;
  const { title: _t, instructions: _i, assignees: _a, ...rest } = data as Record<string, unknown>;
  return Object.keys(rest).length > 0 ? rest : null;
}

function decidedBy(visit: Visit): string {
  const by = (visit.output as { by?: unknown } | null)?.by;
  return typeof by === "string" && by !== "" ? ` by ${by}` : "";
}

function jsonProblem(source: string): string | null {
  try {
    JSON.parse(source);
    return null;
  } catch (e) {
    return `not JSON: ${(e as Error).message}`;
  }
}
