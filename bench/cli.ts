/**
 * CLI start-up (`cli.help_ms`): wall time of `node dist/cli/main.js --help` in a new process,
 * Node's own start-up included, as a user typing `skein --help` sees it. One warm-up (the OS file
 * cache), then 10 samples one after the other; p50. Target < 300 ms.
 *
 * The built CLI is measured: `npm run build` runs first when dist/cli/main.js is missing or older
 * than a file under src/.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Measured, percentile, progress } from "./lib.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const CLI = join(ROOT, "dist", "cli", "main.js");
const SAMPLES = 10;

export async function benchCli(): Promise<Measured> {
  ensureBuilt();
  const once = () => {
    const t0 = performance.now();
    const r = spawnSync(process.execPath, [CLI, "--help"], { stdio: ["ignore", "pipe", "pipe"], timeout: 10_000 });
    const ms = performance.now() - t0;
    if (r.status !== 0) throw new Error(`skein --help exited ${r.status ?? r.signal}: ${r.stderr}`);
    return ms;
  };
  once();
  const samples = Array.from({ length: SAMPLES }, once);
  const p50 = percentile(samples, 50);
  return {
    metrics: { help_ms: p50 },
    meta: { cli: { samples: SAMPLES, help_min_ms: Math.min(...samples), help_max_ms: Math.max(...samples) } },
    failures: p50 < 300 ? [] : [`cli: skein --help took ${p50.toFixed(0)} ms (p50), over the 300 ms target`],
  };
}

function ensureBuilt(): void {
  if (existsSync(CLI) && statSync(CLI).mtimeMs >= newestSource()) return;
  progress("cli: dist is missing or stale, running npm run build...");
  const r = spawnSync("npm", ["run", "build"], { cwd: ROOT, stdio: ["ignore", 2, 2] });
  if (r.status !== 0) throw new Error(`npm run build failed (exit ${r.status ?? r.signal})`);
}

function newestSource(): number {
  const src = join(ROOT, "src");
  return Math.max(
    ...readdirSync(src, { recursive: true, encoding: "utf8" }).map((f) => statSync(join(src, f)).mtimeMs),
  );
}
