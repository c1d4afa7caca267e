/**
 * The engine process of the map bench (map.ts): `node --import tsx bench/map-child.ts <database
 * url> [items] [max_concurrency]`. Opens an engine with a no-op in-process agent, registers
 * mapWorkflow (workloads.ts), starts one run whose map node maps `items` elements (default 10,000) at most
 * `max_concurrency` (default 200) at a time, and waits for it. Then it prints one JSON line
 * `{"type":"map",...}`: the time from startRun to the run SUCCEEDED, the run's status and how
 * many outputs its map gave, and the process's memory: `peak_rss_mb` is the kernel's high-water
 * mark of its resident set (getrusage's ru_maxrss, through process.resourceUsage), so it is the
 * true peak over the process's life, not a sample; `end_rss_mb` is the resident set once the run
 * ended (garbage included). It closes the engine and exits.
 */
import { createEngine } from "../src/index.js";
import { report } from "./children.js";
import { MAP_AGENTS, mapWorkflow } from "./workloads.js";

const url = process.argv[2];
const items = Number(process.argv[3] ?? 10_000);
const concurrency = Number(process.argv[4] ?? 200);
if (!url) throw new Error("usage: map-child.ts <database url> [items] [max_concurrency]");

// The engine's own cap on attempts in flight (default 100) must not be what limits the map.
const engine = await createEngine({ database: url, agents: MAP_AGENTS, maxConcurrency: 1000 });
try {
  const workflow = mapWorkflow(concurrency);
  await engine.registerWorkflow(workflow);
  const input = { items: Array.from({ length: items }, (_, i) => i) };
  const t0 = performance.now();
  const run = await engine.startRun(workflow.id, { input });
  const done = await engine.waitForRun(run.run_id);
  const ms = performance.now() - t0;
  const rss = process.memoryUsage.rss();
  const outputs = (done.output as { each?: unknown } | null)?.each;
  const mb = (bytes: number) => bytes / (1024 * 1024);
  report({
    type: "map",
    items,
    max_concurrency: concurrency,
    status: done.status,
    outputs: Array.isArray(outputs) ? outputs.length : null,
    ms,
    items_per_s: (items / ms) * 1000,
    // resourceUsage().maxRSS is in kilobytes.
    peak_rss_mb: process.resourceUsage().maxRSS / 1024,
    end_rss_mb: mb(rss),
  });
} finally {
  await engine.close();
}
