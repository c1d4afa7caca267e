/**
 * map10k (DESIGN §11.1): one run whose `map` node maps 10,000 items with a no-op in-process
 * agent, `max_concurrency: 200` (workloads.ts mapWorkflow), each item a child run. Measured in an
 * engine process of its own (map-child.ts, with the engine's maxConcurrency at 1000 so that the
 * map's own limit is the one that holds), on a fresh database:
 *
 * - `map10k_items_per_s` (SQLite) and `postgres.map10k_items_per_s` (one engine): 10,000 / the
 *   time from startRun to waitForRun resolving with the run SUCCEEDED.
 * - `map10k_rss_mb` (SQLite): the peak resident memory of that process over its whole life (the
 *   kernel's high-water mark, getrusage ru_maxrss: not a sample, so no peak between samples is
 *   missed). It includes node, tsx's loader thread and the engine: meta.map10k.baseline_peak_rss_mb
 *   is the same process mapping 1 item, so the map's own share is the difference.
 *   meta.map10k.end_rss_mb is the resident set just after the run ended (garbage included).
 */
import { BenchChild, type Message } from "./children.js";
import { type Measured, progress, tempDb } from "./lib.js";
import { tempSchema } from "./postgres.js";

const ITEMS = 10_000;
const MAX_CONCURRENCY = 200;

interface MapReport extends Message {
  items: number;
  status: string;
  outputs: number | null;
  ms: number;
  items_per_s: number;
  peak_rss_mb: number;
  end_rss_mb: number;
}

export async function benchMap(): Promise<Measured> {
  const baseline = await sqliteChild(1);
  const result = await sqliteChild(ITEMS);
  progress(
    `map10k: ${ITEMS} items in ${(result.ms / 1000).toFixed(1)} s, peak rss ${result.peak_rss_mb.toFixed(0)} MB`,
  );
  return {
    metrics: { map10k_items_per_s: result.items_per_s, map10k_rss_mb: result.peak_rss_mb },
    meta: { map10k: { ...withoutType(result), baseline_peak_rss_mb: baseline.peak_rss_mb } },
    failures: checks(result, "map10k"),
  };
}

export async function benchPgMap(): Promise<Measured> {
  const db = tempSchema("map10k");
  try {
    const result = await mapChild(db.url, ITEMS);
    progress(`pg map10k: ${ITEMS} items in ${(result.ms / 1000).toFixed(1)} s`);
    return {
      metrics: { map10k_items_per_s: result.items_per_s },
      meta: { map10k: withoutType(result) },
      failures: checks(result, "pg map10k"),
    };
  } finally {
    await db.cleanup();
  }
}

async function sqliteChild(items: number): Promise<MapReport> {
  const db = tempDb("map10k");
  try {
    return await mapChild(db.url, items);
  } finally {
    db.cleanup();
  }
}

async function mapChild(url: string, items: number): Promise<MapReport> {
  const child = new BenchChild(`map engine (${items} items)`, "bench/map-child.ts", [
    url,
    String(items),
    String(MAX_CONCURRENCY),
  ]);
  try {
    return await child.take<MapReport>("map", 120_000);
  } finally {
    await child.stop();
  }
}

/** What makes the figure untrustworthy: the run did not succeed, or its map did not give every item's output. */
function checks(r: MapReport, name: string): string[] {
  const failures: string[] = [];
  if (r.status !== "SUCCEEDED") failures.push(`${name}: the run ended ${r.status}, not SUCCEEDED`);
  if (r.outputs !== r.items) failures.push(`${name}: the map gave ${r.outputs} outputs for ${r.items} items`);
  return failures;
}

function withoutType({ type: _type, ...rest }: MapReport): Omit<MapReport, "type"> {
  return rest;
}
