/** Loading from the API, live events and a ticking clock, as Preact hooks. */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { openStream } from "./stream.js";
import type { RunEvent } from "./types.js";

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  /** Loads again. Calls while a load runs are folded into one more load after it: never a pile of requests. */
  reload: () => void;
}

/** Runs `load` now and whenever `key` changes (forgetting the old data), and on `reload()`. */
export function useLoad<T>(load: () => Promise<T>, key: string): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown }>({ data: undefined, error: undefined });
  const latest = useRef(load);
  latest.current = load;
  const reloadRef = useRef<() => void>(() => {});

  useEffect(() => {
    // One loader per key: a slow answer for an old key is dropped (`alive`), never shown.
    const loader = { running: false, again: false, alive: true };
    const run = () => {
      if (!loader.alive) return;
      if (loader.running) {
        loader.again = true;
        return;
      }
      loader.running = true;
      latest
        .current()
        .then(
          (data) => loader.alive && setState({ data, error: undefined }),
          (error: unknown) => loader.alive && setState((s) => ({ data: s.data, error })),
        )
        .finally(() => {
          loader.running = false;
          if (loader.again) {
            loader.again = false;
            run();
          }
        });
    };
    reloadRef.current = run;
    setState({ data: undefined, error: undefined });
    run();
    return () => {
      loader.alive = false;
    };
  }, [key]);

  const reload = useCallback(() => reloadRef.current(), []);
  return { ...state, reload };
}

// One shared stream of every event for the pages that follow everything (runs list, inbox, nav).
const liveListeners = new Set<(event: RunEvent | null) => void>();
let closeLive: (() => void) | null = null;

/**
 * Calls `listener` with every event the server commits, and with null when the stream
 * (re)connects (events missed meanwhile are not replayed: reload then).
 */
export function useLiveEvents(listener: (event: RunEvent | null) => void): void {
  const latest = useRef(listener);
  latest.current = listener;
  useEffect(() => {
    const forward = (event: RunEvent | null) => latest.current(event);
    liveListeners.add(forward);
    closeLive ??= openStream({
      onEvent: (event) => {
        for (const l of liveListeners) l(event);
      },
      onOpen: () => {
        for (const l of liveListeners) l(null);
      },
    });
    return () => {
      liveListeners.delete(forward);
      if (liveListeners.size === 0) {
        closeLive?.();
        closeLive = null;
      }
    };
  }, []);
}

/** The time now, re-rendering every `intervalMs` (durations of running things, time left). */
export function useNow(intervalMs = 1000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), intervalMs);
    return () => clearInterval(timer);
  }, [intervalMs]);
  return now;
}
