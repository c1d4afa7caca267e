/**
 * The demo: the reference design's case study on the embedded SQLite default (./skein.db).
 * Three collectors run in parallel (platform b answers "502 Bad Gateway" once, so a retry
 * shows), a reviewer sends the first draft back for rework (a loop), then three publishers run
 * in parallel and an aggregator reports. Agents are simulated with short delays.
 *
 *   npm run demo
 */
import { readFileSync } from "node:fs";
import { createEngine, type Task } from "../src/index.js";

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });

const failedOnce = new Set<string>();

const agents = {
  collector: async (t: Task) => {
    const { platform, topic } = t.payload as { platform: string; topic: string };
    await sleep(100 + Math.random() * 200, t.signal);
    if (platform === "b" && !failedOnce.has(t.execution_id)) {
      failedOnce.add(t.execution_id);
      throw new Error("502 Bad Gateway");
    }
    return { platform, items: [`${topic} news from ${platform}`] };
  },
  content_reviewer: async (t: Task) => {
    await sleep(150, t.signal);
    return { ok: t.visit > 1, note: t.visit > 1 ? "looks good" : "needs a better headline" };
  },
  editor: async (t: Task) => {
    await sleep(100, t.signal);
    return { headline: "A better headline" };
  },
  publisher: async (t: Task) => {
    await sleep(100 + Math.random() * 100, t.signal);
    return { url: `https://${(t.payload as { platform: string }).platform}.example/${t.run_id.slice(-8)}` };
  },
};

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
