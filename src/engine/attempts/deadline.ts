/** Waiting for something at most until a deadline: what `close` and the dispatcher's stop need to always end. */

/** Waits for `promise` until `deadline` (epoch ms): true when it settled in time (a rejection is thrown). */
export async function untilDeadline(promise: Promise<unknown>, deadline: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise.then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()));
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
