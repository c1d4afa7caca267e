/** useRun: a run's live state and each node's streamed text, following the run's event stream. */
import { useEffect, useReducer } from "react";
import { isProgress, type SkeinClient } from "skein/client";
import { emptyView, type RunView, runViewReducer } from "./run-view.js";

export interface UseRunOptions {
  /** The client to read with. Make it once (outside the component, or in useMemo): a new one restarts the stream. */
  client: SkeinClient;
  /** Keep the run's events in `events` (every one since the start, progress too). @defaultValue false */
  events?: boolean;
}

/**
 * A run as it runs: reads it, follows its event stream from the start (reconnecting by itself),
 * keeps each node's streamed text, and reads the run again after each stored event (coalesced:
 * at most one read in flight and one after it). A null or empty runId shows nothing.
 * @example
 * const client = createClient({ token });
 * function Run({ id }: { id: string }) {
 *   const { run, nodes, connected } = useRun(id, { client });
 *   return <pre>{run?.status} {nodes.draft?.text}</pre>;
 * }
 */
export function useRun(runId: string | null | undefined, options: UseRunOptions): RunView {
  const { client } = options;
  const keepEvents = options.events === true;
  const [view, dispatch] = useReducer(runViewReducer, keepEvents, emptyView);

  useEffect(() => {
    dispatch({ type: "reset", keepEvents });
    if (!runId) return;
    let live = true;
    let reading = false;
    let again = false;
    const read = async () => {
      if (reading) {
        again = true;
        return;
      }
      reading = true;
      try {
        do {
          again = false;
          const run = await client.getRun({ run_id: runId });
          if (live) dispatch({ type: "run", run });
        } while (again && live);
      } catch (e) {
        if (live) dispatch({ type: "error", error: e instanceof Error ? e : new Error(String(e)) });
      } finally {
        reading = false;
      }
    };
    void read();
    const subscription = client.subscribe(
      runId,
      (event) => {
        if (!live) return;
        dispatch({ type: "event", event, keepEvents });
        if (!isProgress(event)) void read();
      },
      {
        fromStart: true,
        onConnection: (connected) => {
          if (live) dispatch({ type: "connected", connected });
        },
        onError: (error, fatal) => {
          if (live && fatal) dispatch({ type: "error", error });
        },
      },
    );
    return () => {
      live = false;
      subscription.close();
    };
  }, [client, runId, keepEvents]);

  return view;
}
