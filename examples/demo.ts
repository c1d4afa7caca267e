/**
 * The demo: the reference design's case study on the embedded SQLite default (./skein.db).
 * Three collectors run in parallel (platform b answers "502 Bad Gateway" once, so a retry
 * shows), a reviewer sends the first draft back for rework (a loop), then three publishers run
 * in parallel and an aggregator reports. Agents are simulated with short delays.
 *
 *   npm run demo
 */
import { readFileSync } from "node:fs";
import { createEngine } from "../src/index.js";

import agents from "./content-publish/agents.js";

const engine = await createEngine({ database: process.env.SKEIN_DB ?? "sqlite:./skein.db", agents });
const started = Date.now();
engine.subscribe((e) => {
  const at = `${String(Date.now() - started).padStart(5)} ms`;
  const where = e.node_id ? `${e.node_id}#${e.visit}` : "";
  const detail = e.type === "node.retrying" ? ` (${(e.data.error as { message: string }).message})` : "";
  if (e.type !== "node.ready") console.log(`${at}  ${e.type.padEnd(15)} ${where}${detail}`);
});

try {
  const { version } = await engine.registerWorkflow(
    JSON.parse(readFileSync(new URL("./content-publish/workflow.json", import.meta.url), "utf8")),
  );
  const run = await engine.startRun("content-publish", { input: { topic: "durable agents" } });
  console.log(`started run ${run.run_id} of content-publish v${version}\n`);
  const done = await engine.waitForRun(run.run_id);
  console.log(`\nrun ${done.status} in ${done.ended_at! - done.created_at} ms`);
  for (const n of done.nodes)
    console.log(`  ${n.node_id.padEnd(10)} ${n.state.padEnd(10)} visit ${n.visit} attempt ${n.attempt}`);
  console.log(`output: ${JSON.stringify(done.output, null, 2)}`);
  process.exitCode = done.status === "SUCCEEDED" ? 0 : 1;
} finally {
  await engine.close();
}
