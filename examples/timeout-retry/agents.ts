/**
 * `flaky` fails its first two attempts (like an API answering 503); `slow` hangs on its first
 * attempt until the 0.5 s timeout aborts it, then answers at once.
 */
import type { Task } from "skein";

export default {
  flaky(task: Task) {
    if (task.attempt <= 2) throw new Error(`503 Service Unavailable (attempt ${task.attempt})`);
    return { attempts: task.attempt };
  },
  slow(task: Task) {
    if (task.attempt > 1) return { attempts: task.attempt };
    return new Promise((_resolve, reject) => {
      task.signal.addEventListener("abort", () => reject(task.signal.reason));
    });
  },
};
