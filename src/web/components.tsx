/** Small pieces the pages share. Everything shown is a text node: no HTML from data, ever. */
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, messageOf } from "./api.js";
import { when } from "./format.js";
import { JsonView } from "./json-view.js";
import type { Problem } from "./types.js";

/** A run status or visit state, coloured. */
export function Badge(props: { state: string }) {
  return <span class={`badge state-${props.state.toLowerCase()}`}>{props.state}</span>;
}

/** A JSON value as a foldable tree with a copy button (json-view.tsx); `empty` when there is none. */
export function JsonBlock(props: { value: unknown; empty?: string; openDepth?: number }) {
  if (props.value === null || props.value === undefined) return <span class="muted">{props.empty ?? "none"}</span>;
  return <JsonView value={props.value} openDepth={props.openDepth} />;
}

/**
 * An instant: local time to the millisecond and how long ago (or how soon) it is, kept current;
 * the full date and the UTC instant in its tooltip and `datetime`. `-` for none.
 */
export function Time(props: { at: number | null }) {
  const now = useClock();
  if (props.at === null) return <span class="muted">-</span>;
  const w = when(props.at, now);
  return (
    <time dateTime={w.iso} title={w.full}>
      {w.clock} <span class="time-relative muted">{w.relative}</span>
    </time>
  );
}

/** One timer for every `Time` on the page: the current time, each second. */
const clockListeners = new Set<(now: number) => void>();
let clockTimer: ReturnType<typeof setInterval> | undefined;
function useClock(): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    clockListeners.add(setNow);
    clockTimer ??= setInterval(() => {
      const t = Date.now();
      for (const listener of clockListeners) listener(t);
    }, 1000);
    return () => {
      clockListeners.delete(setNow);
      if (clockListeners.size === 0) {
        clearInterval(clockTimer);
        clockTimer = undefined;
      }
    };
  }, []);
  return now;
}

/** Problems with their paths (`nodes[1].depends_on[0]: unknown node "x"`). */
export function ProblemList(props: { problems: Problem[]; kind: "error" | "warning"; label: string }) {
  if (props.problems.length === 0) return null;
  return (
    <ul class={`problems ${props.kind}`} aria-label={props.label}>
      {props.problems.map((p, i) => (
        <li key={`${p.path}:${i}`}>
          <code class="problem-path">{p.path}</code>: <span class="problem-message">{p.message}</span>
        </li>
      ))}
    </ul>
  );
}

/** An error from the API (with its problems listed) or any other failure. */
export function ErrorNote(props: { error: unknown; prefix?: string }) {
  if (props.error === undefined || props.error === null) return null;
  const problems = props.error instanceof ApiError ? props.error.problems : [];
  return (
    <div class="error-note" role="alert">
      <p>
        {props.prefix ? `${props.prefix}: ` : ""}
        {messageOf(props.error)}
      </p>
      <ProblemList problems={problems} kind="error" label="problems" />
    </div>
  );
}

/**
 * A modal question (the native <dialog>): the action runs only on the confirm button; Escape or
 * the other button closes it.
 */
export function ConfirmDialog(props: {
  title: string;
  confirmLabel: string;
  danger?: boolean;
  busy?: boolean;
  onConfirm: () => void;
  onClose: () => void;
  children?: ComponentChildren;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    dialog.current?.showModal();
  }, []);
  return (
    <dialog ref={dialog} class="confirm" aria-label={props.title} onClose={props.onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          props.onConfirm();
        }}
      >
        <h3>{props.title}</h3>
        {props.children}
        <div class="actions">
          <button type="button" onClick={() => dialog.current?.close()}>
            Back
          </button>
          <button type="submit" class={props.danger ? "danger" : "primary"} disabled={props.busy}>
            {props.confirmLabel}
          </button>
        </div>
      </form>
    </dialog>
  );
}

/** A progress value as text: a string whole, `{ content }` (a model's text so far) its content, else JSON. */
export function progressText(value: unknown): string {
  const content =
    value !== null && typeof value === "object" && typeof (value as { content?: unknown }).content === "string"
      ? (value as { content: string }).content
      : null;
  return typeof value === "string" ? value : (content ?? JSON.stringify(value, null, 2));
}

/** A run's tags as `name: value` labels, text only; nothing when it has none. */
export function Tags(props: { tags: Record<string, string> | undefined }) {
  const entries = Object.entries(props.tags ?? {});
  if (entries.length === 0) return null;
  return (
    <ul class="tags" aria-label="tags">
      {entries.map(([name, value]) => (
        <li key={name} class="tag">
          {name}: {value}
        </li>
      ))}
    </ul>
  );
}

/** Text that grows while an attempt runs, kept scrolled to its end: a live log, text only. */
export function LiveText(props: { text: string; label: string }) {
  const box = useRef<HTMLPreElement>(null);
  useEffect(() => {
    if (box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [props.text]);
  return (
    <pre class="json live-progress" role="log" aria-label={props.label} ref={box}>
      {props.text}
    </pre>
  );
}
