/** Process lifetime for the commands that run an engine: staying alive, and stopping on a signal. */
import { EXIT } from "./output.js";

export type StopSignal = "SIGINT" | "SIGTERM";

/**
 * Keeps the process alive while an engine serves: the engine's own timers are unref'd, so a run
 * waiting for a retry would otherwise let the process exit. Returns the release.
 */
export function keepAlive(): () => void {
  const timer = setInterval(() => {}, 1 << 30);
  return () => clearInterval(timer);
}

/**
 * Resolves on the first SIGINT or SIGTERM (the caller stops gracefully); a second signal exits
 * at once, leaving attempts in flight to the next engine's recovery.
 */
export function stopSignal(): { received: Promise<StopSignal>; dispose(): void } {
  let resolve!: (signal: StopSignal) => void;
  const received = new Promise<StopSignal>((r) => {
    resolve = r;
  });
  let count = 0;
  const handler = (signal: StopSignal) => {
    count += 1;
    if (count > 1) {
      process.stderr.write(
        `skein: ${signal} again: exiting without waiting (the next engine recovers what was running)\n`,
      );
      process.exit(EXIT.interrupted);
    }
    resolve(signal);
  };
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
  return {
    received,
    dispose() {
      process.off("SIGINT", handler);
      process.off("SIGTERM", handler);
    },
  };
}
