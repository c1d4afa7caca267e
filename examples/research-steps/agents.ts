/**
 * `researcher` plans, searches each topic and writes a summary, each call a durable step
 * (`task.step`, docs/durable-steps.md). The search tool answers "429 rate limited" the first time
 * it is asked about its second topic: the attempt fails, and the retry gets the plan and the
 * first search from their records without calling them again, then carries on. `calls` lists the
 * calls that really ran (a stand-in for a model and a search API that cost money).
 */
import type { Task } from "skein";

export const calls: string[] = [];
let rateLimited = false;

async function plan(question: string): Promise<string[]> {
  calls.push("plan");
  return [`${question}: history`, `${question}: today`];
}

async function search(topic: string, idempotencyKey: string): Promise<string> {
  calls.push(`search ${topic}`);
  if (topic.endsWith("today") && !rateLimited) {
    rateLimited = true;
    throw new Error("429 rate limited (retry later)");
  }
  // A real tool would send idempotencyKey with its request, so a repeat does nothing twice.
  return `3 sources on ${topic} (${idempotencyKey.slice(-8)})`;
}

export default {
  async researcher(task: Task) {
    const { question } = task.payload as { question: string };
    const topics = await task.step("plan", () => plan(question));
    const found: string[] = [];
    for (const [i, topic] of topics.entries()) {
      found.push(await task.step(`search:${i}`, ({ idempotency_key }) => search(topic, idempotency_key)));
    }
    const summary = await task.step("summarize", () => {
      calls.push("summarize");
      return `${found.length} topics researched`;
    });
    return { summary, found, attempts: task.attempt };
  },
};
