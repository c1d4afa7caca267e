/**
 * What useRun shows, as a pure reducer over what it hears: the run as last read, and each node's
 * streamed text. A node's text is the concatenated `delta`s of its latest attempt's progress; a
 * later attempt (a progress event of a higher visit or attempt, node.started, node.retrying)
 * starts it again, since the earlier attempt's stream is superseded.
 */
import type { Schema, StreamEvent } from "skein/client";

/** A node's live output. */
export interface NodeStream {
  /** The latest attempt's streamed text: its progress deltas, concatenated. */
  text: string;
  /** The attempt it comes from (1 for the first). */
  attempt: number;
  /** The visit it comes from (a loop visits a node again). */
  visit: number;
  /** The latest progress value as sent (a custom agent's `task.progress(value)` that is not a delta). */
  progress: unknown;
}

export interface RunView {
  /** The run and its nodes as last read (`GET /v1/runs/{run_id}`); null until the first answer. */
  run: Schema<"RunWithNodes"> | null;
  /** Each node's streamed text, by node_id: only nodes that have streamed or started. */
  nodes: Record<string, NodeStream>;
  /** The run's events so far, oldest first (progress too), when useRun was asked to keep them. */
  events?: StreamEvent[];
  /** Why the run could not be read or followed (null while all is well). */
  error: Error | null;
  /** Whether the event stream is open now (it reconnects by itself when false). */
  connected: boolean;
}

export type RunViewAction =
  | { type: "reset"; keepEvents: boolean }
  | { type: "event"; event: StreamEvent; keepEvents: boolean }
  | { type: "run"; run: Schema<"RunWithNodes"> }
  | { type: "error"; error: Error }
  | { type: "connected"; connected: boolean };

export function emptyView(keepEvents: boolean): RunView {
  return { run: null, nodes: {}, error: null, connected: false, ...(keepEvents ? { events: [] } : {}) };
}

export function runViewReducer(view: RunView, action: RunViewAction): RunView {
  switch (action.type) {
    case "reset":
      return emptyView(action.keepEvents);
    case "run":
      return { ...view, run: action.run, error: null };
    case "error":
      return { ...view, error: action.error };
    case "connected":
      return view.connected === action.connected ? view : { ...view, connected: action.connected };
    case "event": {
      const nodes = streamsAfter(view.nodes, action.event);
      const events = action.keepEvents ? [...(view.events ?? []), action.event] : view.events;
      return nodes === view.nodes && events === view.events ? view : { ...view, nodes, ...(events ? { events } : {}) };
    }
  }
}

/** Which of two (visit, attempt) pairs is later: > 0 when `a` is. */
function compare(a: { visit: number; attempt: number }, b: { visit: number; attempt: number }): number {
  return a.visit !== b.visit ? a.visit - b.visit : a.attempt - b.attempt;
}

function deltaOf(progress: unknown): string | null {
  if (progress === null || typeof progress !== "object") return null;
  const delta = (progress as { delta?: unknown }).delta;
  return typeof delta === "string" ? delta : null;
}

/** The nodes' streams after one event (the same object when it changes nothing). */
export function streamsAfter(nodes: Record<string, NodeStream>, event: StreamEvent): Record<string, NodeStream> {
  const nodeId = event.node_id;
  if (nodeId === null) return nodes;
  const current = nodes[nodeId];
  const data = event.data as { attempt?: unknown; progress?: unknown };
  const attempt = typeof data.attempt === "number" ? data.attempt : (current?.attempt ?? 1);
  const at = { visit: event.visit ?? 0, attempt };
  if (event.type === "node.progress") {
    const delta = deltaOf(data.progress) ?? "";
    const order = current === undefined ? 1 : compare(at, current);
    if (order < 0) return nodes; // a superseded attempt's late word
    const text = order > 0 || current === undefined ? delta : current.text + delta;
    return { ...nodes, [nodeId]: { ...at, text, progress: data.progress } };
  }
  if (event.type === "node.started") {
    if (current !== undefined && compare(at, current) <= 0) return nodes;
    return { ...nodes, [nodeId]: { ...at, text: "", progress: undefined } };
  }
  if (event.type === "node.retrying") {
    // The attempt failed and another will start: its text is no longer the node's.
    if (current === undefined || compare(at, current) < 0) return nodes;
    return { ...nodes, [nodeId]: { ...at, text: "", progress: undefined } };
  }
  return nodes;
}
