/**
 * The run page's actions, each behind a confirmation: cancel (with a reason, optionally
 * compensating first), retry (optionally from a chosen node; forced when the run needs
 * attention), pause and resume (DESIGN §16), failing a node that waits for an attempt, and fork
 * from a node (its run input and the node's payload editable as JSON; the page then shows the
 * new run). A refusal (409: the run already ended, or is not FAILED or CANCELLED; 400: a fork's
 * JSON or input) is shown in the dialog.
 */
import { useState } from "preact/hooks";
import { ApiError, api } from "../api.js";
import { ConfirmDialog, ErrorNote } from "../components.js";
import { navigate } from "../route.js";
import type { Run, RunWithNodes, Visit } from "../types.js";

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

/** JSON as the fork dialog shows it: indented, "" for a payload not resolved yet. */
const jsonText = (value: unknown) => (value === null || value === undefined ? "" : JSON.stringify(value, null, 2));

/**
 * Fork the run from `node` (DESIGN §16): a new run keeps what this one did before the node and
 * runs the node and what follows. Only what was edited is sent (the run input, the node's
 * payload), so the fork's `run.forked` event says what changed.
 */
export function ForkDialog(props: { run: RunWithNodes; node: Visit; onClose: () => void }) {
  const { run, node } = props;
  const [input, setInput] = useState(jsonText(run.input));
  const [payload, setPayload] = useState(jsonText(node.payload));
  const { busy, error, confirm } = useAction(
    async () => {
      const editedInput = input !== jsonText(run.input);
      const editedPayload = payload.trim() !== "" && payload !== jsonText(node.payload);
      const fork = await api<Run>("POST", `/v1/runs/${encodeURIComponent(run.run_id)}/fork`, {
        from: node.node_id,
        ...(editedInput ? { input: parseJson(input, "input") } : {}),
        ...(editedPayload ? { payloads: { [node.node_id]: parseJson(payload, `payloads.${node.node_id}`) } } : {}),
      });
      navigate({ page: "run", runId: fork.run_id, node: node.node_id });
    },
    { onClose: props.onClose, onDone: () => {} },
  );
  return (
    <ConfirmDialog
      title={`Fork from ${node.node_id}?`}
      confirmLabel="Fork the run"
      busy={busy}
      onConfirm={() => void confirm()}
      onClose={props.onClose}
    >
      <p>
        A new run keeps what this one did before {node.node_id} without running it again, and runs {node.node_id} and
        everything after it with the input and payload below. This run is not changed.
      </p>
      <label class="field">
        Run input (JSON)
        <textarea name="input" rows={6} value={input} onInput={(e) => setInput(e.currentTarget.value)} />
      </label>
      <label class="field">
        Payload of {node.node_id} (JSON; empty: resolved from the workflow)
        <textarea name="payload" rows={6} value={payload} onInput={(e) => setPayload(e.currentTarget.value)} />
      </label>
      <ErrorNote error={error} prefix="Not forked" />
    </ConfirmDialog>
  );
}

function parseJson(source: string, path: string): unknown {
  try {
    return JSON.parse(source) as unknown;
  } catch (e) {
    throw new ApiError(400, "validation", `The ${path} is not JSON`, [{ path, message: (e as Error).message }]);
  }
}
