/**
 * Simulated agents of the case study. Each takes 10–50 ms. Platform b's collector answers
 * "502 Bad Gateway" on its first attempt, so a retry shows; the reviewer sends the first draft
 * back for rework (a loop), then routes to the three publishers.
 */
import type { Task } from "../../src/index.js";

function work(task: Task, ms = 10 + Math.random() * 40): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    task.signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(task.signal.reason);
    });
  });
}

export default {
  async collector(task: Task) {
    const { platform, topic } = task.payload as { platform: string; topic: string };
    await work(task);
    if (platform === "b" && task.attempt === 1) throw new Error("502 Bad Gateway");
    return { platform, items: [`${topic}: trending on ${platform}`, `${topic}: an explainer from ${platform}`] };
  },

  async content_reviewer(task: Task) {
    await work(task);
    const items = Object.values(task.deps).flatMap((d) => (d.output as { items: string[] }).items);
    if (task.visit === 1) return task.route("rework", { ok: false, note: "the headline needs work" });
    return task.route(["publish_a", "publish_b", "publish_c"], { ok: true, items: items.length });
  },

  async editor(task: Task) {
    await work(task);
    return { headline: "A sharper headline" };
  },

  async publisher(task: Task) {
    await work(task);
    const { platform } = task.payload as { platform: string };
    // execution_id is the idempotency key: a retried publish must not post twice.
    return { platform, url: `https://${platform}.example/posts/${task.execution_id.slice(-24)}` };
  },

  async unpublisher(task: Task) {
    await work(task);
    return { removed: (task.payload as { platform: string }).platform };
  },
};
