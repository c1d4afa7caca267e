/**
 * The run page's "send event" form (DESIGN §11.2), offered while a wait_event node is WAITING:
 * the event's name (one of those the waiting nodes wait for), a JSON payload and an optional
 * idempotency key, sent with `POST /v1/runs/{run_id}/events`. A refusal stays in the dialog.
 */
import { useState } from "preact/hooks";
import { ApiError, api } from "../api.js";
import { ConfirmDialog, ErrorNote } from "../components.js";
import type { RunWithNodes } from "../types.js";
import { useAction } from "./run-actions.js";

/** The event names the run's WAITING wait_event nodes wait for, in node order, each once. */
export function awaitedEvents(run: RunWithNodes): string[] {
  const names = run.nodes
    .filter((n) => n.state === "WAITING" && n.agent_type === "wait_event")
    .map((n) => (n.payload as { event?: unknown } | null)?.event)
    .filter((e): e is string => typeof e === "string");
  return [...new Set(names)];
}

export function SendEventDialog(props: { run: RunWithNodes; onClose: () => void; onDone: () => void }) {
  const names = awaitedEvents(props.run);
  const [name, setName] = useState(names[0] ?? "");
  const [payload, setPayload] = useState("{}");
  const [key, setKey] = useState("");
  const { busy, error, confirm } = useAction(
    () =>
      api("POST", `/v1/runs/${encodeURIComponent(props.run.run_id)}/events`, {
        name,
        payload: parsePayload(payload),
        ...(key.trim() ? { idempotency_key: key.trim() } : {}),
      }),
    props,
  );
  return (
    <ConfirmDialog
      title="Send an event?"
      confirmLabel="Send the event"
      busy={busy}
      onConfirm={() => void confirm()}
      onClose={props.onClose}
    >
      <p>The oldest node waiting for this event receives it; its payload becomes that node's output.</p>
      <label class="field">
        Event
        <select name="name" value={name} onChange={(e) => setName(e.currentTarget.value)}>
          {names.map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </select>
      </label>
      <label class="field">
        Payload (JSON)
        <textarea name="payload" rows={6} value={payload} onInput={(e) => setPayload(e.currentTarget.value)} />
      </label>
      <label class="field">
        Idempotency key (optional)
        <input name="idempotency_key" value={key} onInput={(e) => setKey(e.currentTarget.value)} />
      </label>
      <ErrorNote error={error} prefix="Not sent" />
    </ConfirmDialog>
  );
}

function parsePayload(source: string): unknown {
  if (source.trim() === "") return null;
  try {
    return JSON.parse(source) as unknown;
  } catch (e) {
    throw new ApiError(400, "validation", "The payload is not JSON", [
      { path: "payload", message: (e as Error).message },
    ]);
  }
}
