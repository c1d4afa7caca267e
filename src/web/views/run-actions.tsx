/**
 * The run page's two actions, each behind a confirmation: cancel (with a reason, optionally
 * compensating first) and retry (optionally from a chosen node; forced when the run needs
 * attention). A refusal (409: the run already ended, or is not FAILED or CANCELLED) is shown
 * in the dialog.
 */
import { useState } from "preact/hooks";
import { api } from "../api.js";
import { ConfirmDialog, ErrorNote } from "../components.js";
import type { RunWithNodes } from "../types.js";

/**
 * A dialog's one action: busy while it runs; when it succeeds, `onDone` then `onClose`; when it
 * fails, the error stays in the dialog.
 */
export function useAction(action: () => Promise<unknown>, props: { onClose: () => void; onDone: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const confirm = async () => {
    setBusy(true);
    try {
      await action();
      props.onDone();
      props.onClose();
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  };
  return { busy, error, confirm };
}

export function CancelDialog(props: { runId: string; onClose: () => void; onDone: () => void }) {
  const [reason, setReason] = useState("");
  const [compensate, setCompensate] = useState(false);
  const { busy, error, confirm } = useAction(
    () =>
      api("POST", `/v1/runs/${encodeURIComponent(props.runId)}/cancel`, {
        ...(reason.trim() ? { reason: reason.trim() } : {}),
        compensate,
      }),
    props,
  );
  return (
    <ConfirmDialog
      title="Cancel this run?"
      confirmLabel="Cancel the run"
      danger
      busy={busy}
      onConfirm={() => void confirm()}
      onClose={props.onClose}
    >
      <p>
        Active nodes are cancelled and their late results ignored. This cannot be undone, but the run can be retried.
      </p>
      <label class="field">
        Reason (optional)
        <input name="reason" value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
      </label>
      <label class="check">
        <input type="checkbox" checked={compensate} onChange={(e) => setCompensate(e.currentTarget.checked)} /> Undo
        what it did first (run the compensations)
      </label>
      <ErrorNote error={error} prefix="Not cancelled" />
    </ConfirmDialog>
  );
}

export function RetryDialog(props: { run: RunWithNodes; onClose: () => void; onDone: () => void }) {
  const [from, setFrom] = useState("");
  const [force, setForce] = useState(false);
  const { busy, error, confirm } = useAction(
    () =>
      api("POST", `/v1/runs/${encodeURIComponent(props.run.run_id)}/retry`, {
        ...(from ? { from } : {}),
        ...(force ? { force } : {}),
      }),
    props,
  );
  return (
    <ConfirmDialog
      title="Retry this run?"
      confirmLabel="Retry the run"
      busy={busy}
      onConfirm={() => void confirm()}
      onClose={props.onClose}
    >
      <p>
        New visits run for what failed or was cancelled (or for the node chosen below) and everything downstream; other
        successes are kept.
      </p>
      <label class="field">
        From
        <select name="from" value={from} onChange={(e) => setFrom(e.currentTarget.value)}>
          <option value="">what failed or was cancelled</option>
          {props.run.nodes.map((n) => (
            <option key={n.node_id} value={n.node_id}>
              {n.node_id}
            </option>
          ))}
        </select>
      </label>
      {props.run.needs_attention && (
        <label class="check">
          <input type="checkbox" checked={force} onChange={(e) => setForce(e.currentTarget.checked)} /> Force: a
          compensation failed, and I have checked by hand
        </label>
      )}
      <ErrorNote error={error} prefix="Not retried" />
    </ConfirmDialog>
  );
}
