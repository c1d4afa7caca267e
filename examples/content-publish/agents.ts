/**
 * Simulated agents of the case study. Each takes 10–50 ms. Platform b's collector answers
 * "502 Bad Gateway" on its first attempt, so a retry shows; the reviewer sends the first draft
 * back for rework (a loop), then routes to the three publishers.
 *
 * `defineAgent<Payload, Output>` types each handler: `task.payload` is the payload the workflow
 * gives the node (workflow.json), and what a handler returns is checked against its output type.
 */
import { defineAgent } from "skein";

/** A simulated call that ends early when the attempt is cancelled or times out. */
function work(task: { signal: AbortSignal }, ms = 10 + Math.random() * 40): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    task.signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(task.signal.reason);
    });
  });
}

type Collected = { platform: string; items: string[] };

export default {
  collector: defineAgent<{ platform: string; topic: string }, Collected>(async (task) => {
    const { platform, topic } = task.payload;
    await work(task);
    if (platform === "b" && task.attempt === 1) throw new Error("502 Bad Gateway");
    return { platform, items: [`${topic}: trending on ${platform}`, `${topic}: an explainer from ${platform}`] };
  }),

  content_reviewer: defineAgent<Record<string, never>, { ok: boolean; note?: string; items?: number }>(async (task) => {
    await work(task);
    const items = Object.values(task.deps).flatMap((d) => (d.output as Collected).items);
    if (task.visit === 1) return task.route("rework", { ok: false, note: "the headline needs work" });
    return task.route(["publish_a", "publish_b", "publish_c"], { ok: true, items: items.length });
  }),

  editor: defineAgent<Record<string, never>, { headline: string }>(async (task) => {
    await work(task);
    return { headline: "A sharper headline" };
  }),

  publisher: defineAgent<{ platform: string }, { platform: string; url: string }>(async (task) => {
    await work(task);
    const { platform } = task.payload;
    // execution_id is the idempotency key: a retried publish must not post twice.
    return { platform, url: `https://${platform}.example/posts/${task.execution_id.slice(-24)}` };
  }),

  unpublisher: defineAgent<{ platform: string }, { removed: string }>(async (task) => {
    await work(task);
    return { removed: task.payload.platform };
  }),
};
