/**
 * The run page's actions, each behind a confirmation: cancel (with a reason, optionally
 * compensating first), retry (optionally from a chosen node; forced when the run needs
 * attention), pause and resume (DESIGN §16), and failing a node that waits for an attempt. A
 * refusal (409: the run already ended, or is not FAILED or CANCELLED) is shown in the dialog.
 */
import { useState } from "preact/hooks";
import { api } from "../api.js";
import { ConfirmDialog, ErrorNote } from "../components.js";
import type { Run, RunWithNodes } from "../types.js";

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

/** Pause (with a reason) or resume a run. */
export function PauseDialog(props: { run: Run; onClose: () => void; onDone: () => void }) {
  const resuming = Boolean(props.run.paused);
  const [reason, setReason] = useState("");
  const { busy, error, confirm } = useAction(
    () =>
      api("POST", `/v1/runs/${encodeURIComponent(props.run.run_id)}/${resuming ? "resume" : "pause"}`, {
        ...(reason.trim() ? { reason: reason.trim() } : {}),
      }),
    props,
  );
  const node = props.run.paused?.node_id;
  return (
    <ConfirmDialog
      title={resuming ? "Resume this run?" : "Pause this run?"}
      confirmLabel={resuming ? "Resume the run" : "Pause the run"}
      busy={busy}
      onConfirm={() => void confirm()}
      onClose={props.onClose}
    >
      {resuming ? (
        <p>
          Its ready nodes start{node ? `, and node ${node}, whose retries ran out, gets one more attempt` : ""}. What
          came due while it was paused starts at once.
        </p>
      ) : (
        <>
          <p>
            No attempt of it starts until it is resumed. Attempts running now finish and are recorded; sleeps and retry
            times keep counting.
          </p>
          <label class="field">
            Reason (optional)
            <input name="reason" value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
          </label>
        </>
      )}
      <ErrorNote error={error} prefix={resuming ? "Not resumed" : "Not paused"} />
    </ConfirmDialog>
  );
}

/** Fail a node that waits for an attempt, taking its failure path. */
export function FailNodeDialog(props: { runId: string; nodeId: string; onClose: () => void; onDone: () => void }) {
  const [reason, setReason] = useState("");
  const { busy, error, confirm } = useAction(
    () =>
      api(
        "POST",
        `/v1/runs/${encodeURIComponent(props.runId)}/nodes/${encodeURIComponent(props.nodeId)}/fail`,
        reason.trim() ? { reason: reason.trim() } : {},
      ),
    props,
  );
  return (
    <ConfirmDialog
      title={`Fail node ${props.nodeId}?`}
      confirmLabel="Fail the node"
      danger
      busy={busy}
      onConfirm={() => void confirm()}
      onClose={props.onClose}
    >
      <p>It gets no more attempts: its failure edges fire, or, without any, the run fails.</p>
      <label class="field">
        Reason (optional)
        <input name="reason" value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
      </label>
      <ErrorNote error={error} prefix="Not failed" />
    </ConfirmDialog>
  );
}
