/**
 * Bulk actions of the runs list: cancel the selected RUNNING runs, or retry the selected FAILED
 * and CANCELLED ones, behind one confirmation that says how many and which. Each run is its own
 * request (POST /v1/runs/{id}/cancel or /retry); the ones refused are listed with the reason.
 */
import { useState } from "preact/hooks";
import { api, messageOf } from "../api.js";
import { ConfirmDialog } from "../components.js";
import { shortId } from "../format.js";
import type { Run } from "../types.js";

export type BulkAction = "cancel" | "retry";

/** Which runs an action applies to: only RUNNING runs are cancelled, only FAILED or CANCELLED ones retried. */
export function eligible(action: BulkAction, run: Run): boolean {
  return action === "cancel" ? run.status === "RUNNING" : run.status === "FAILED" || run.status === "CANCELLED";
}

export function BulkDialog(props: { action: BulkAction; runs: Run[]; onClose: () => void; onDone: () => void }) {
  const { action, runs } = props;
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ done: number; failures: { run: Run; message: string }[] } | null>(null);
  const confirm = async () => {
    setBusy(true);
    const outcomes = await Promise.allSettled(
      runs.map((run) => api("POST", `/v1/runs/${encodeURIComponent(run.run_id)}/${action}`, {})),
    );
    const failures = outcomes.flatMap((o, i) => {
      const run = runs[i];
      return o.status === "rejected" && run ? [{ run, message: messageOf(o.reason) }] : [];
    });
    props.onDone();
    if (failures.length === 0) props.onClose();
    else setResult({ done: runs.length - failures.length, failures });
  };
  const verb = action === "cancel" ? "Cancel" : "Retry";
  const count = `${runs.length} run${runs.length === 1 ? "" : "s"}`;
  return (
    <ConfirmDialog
      title={`${verb} ${count}?`}
      confirmLabel={`${verb} ${count}`}
      danger={action === "cancel"}
      busy={busy}
      onConfirm={() => void confirm()}
      onClose={props.onClose}
    >
      <p>
        {action === "cancel"
          ? "Their active nodes are cancelled and late results ignored; each can be retried later."
          : "Each runs again what failed or was cancelled, and everything downstream."}
      </p>
      <ul class="bulk-runs" aria-label={`runs to ${action}`}>
        {runs.map((run) => (
          <li key={run.run_id}>
            <code title={run.run_id}>{shortId(run.run_id)}</code> {run.workflow_id}
          </li>
        ))}
      </ul>
      {result && (
        <div class="error-note" role="alert">
          <p>
            {result.done} done; {result.failures.length} refused:
          </p>
          <ul aria-label="refused runs">
            {result.failures.map((f) => (
              <li key={f.run.run_id}>
                <code title={f.run.run_id}>{shortId(f.run.run_id)}</code>: {f.message}
              </li>
            ))}
          </ul>
        </div>
      )}
    </ConfirmDialog>
  );
}
