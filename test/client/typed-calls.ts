/**
 * skein/client's inputs are typed from the OpenAPI document: `npm run typecheck` checks this
 * file, and each `@ts-expect-error` line is a mistake those types refuse.
 */
import type { SkeinClient } from "../../src/client/index.js";

export function typed(client: SkeinClient): void {
  // @ts-expect-error getRun needs the run's id
  void client.getRun({});
  // @ts-expect-error a run's status is one of the run statuses
  void client.listRuns({ status: "DONE" });
  // @ts-expect-error startRun needs a body with the workflow's id
  void client.startRun({ body: { input: {} } });
  // @ts-expect-error no operation of that name
  void client.call("getRuns", { run_id: "r" });
}

/** What the calls answer is typed too: a wrong field or status would not compile. */
export async function answers(client: SkeinClient): Promise<string[]> {
  const run = await client.getRun({ run_id: "r" });
  const states: string[] = run.nodes.map((n) => n.state);
  const { reviews } = await client.listReviews({ status: "pending" });
  // @ts-expect-error a run's status is one of the run statuses
  const done: typeof run.status = "DONE";
  return [...states, ...reviews.map((r) => r.node_id), done];
}
