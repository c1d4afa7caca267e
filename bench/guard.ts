/**
 * `npm run bench:guard [-- <commit>]`: the guard on CPU per run (issue 35), measured as a
 * before-and-after in one sitting. CPU per run, and the commit floor beside it, move by 1.5–2.5×
 * between sessions on this project's machines, so a figure from an earlier session cannot show a
 * 5 % change; two checkouts measured turn about, minutes apart, can.
 *
 * Checks `<commit>` out in a temporary worktree (default: the commit that last wrote
 * bench/results/latest.json, the last full bench run), then runs dag8's CPU loop (guard-child.ts:
 * 2,000 runs at 32 in flight after a warm-up, a fresh process and file each time) ROUNDS times on
 * each checkout, alternating which goes first, and prints both medians and the change. Exit code 1
 * when this checkout costs more than 5 % more CPU per run: its issue's note says why.
 * The other checkout runs on this one's node_modules (said when the lockfiles differ).
 */
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, readFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { percentile, progress, round } from "./lib.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const ROUNDS = 7;
const RUNS = 2000;
/** More CPU per run than this, in percent over the other checkout's, fails the guard. */
export const MAX_CHANGE_PCT = 5;

const git = (...args: string[]) => execFileSync("git", args, { cwd: root, encoding: "utf8" }).trim();

/** CPU µs per run of one fresh process on the checkout at `dir`. */
async function measure(dir: string): Promise<number> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(root, "bench", "guard-child.ts"), join(dir, "src", "index.ts"), String(RUNS)],
    { cwd: root, stdio: ["ignore", "pipe", "inherit"], timeout: 120_000 },
  );
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
  });
  const [code, signal] = (await once(child, "close")) as [number | null, string | null];
  const line = out.trim().split("\n").pop() ?? "";
  if (code !== 0 || !line.startsWith("{")) {
    throw new Error(`guard: the loop on ${dir} failed (exit ${code ?? signal}): ${line}`);
  }
  return (JSON.parse(line) as { us_per_run: number }).us_per_run;
}

export interface GuardResult {
  /** The other checkout's commit. */
  commit: string;
  before: number[];
  after: number[];
  /** The change of the median CPU per run, in percent (positive: this checkout costs more). */
  changePct: number;
}

/** Measures this checkout against `ref` (default: the last full bench run's commit), turn about. */
export async function guard(ref?: string): Promise<GuardResult> {
  const commit = git("rev-parse", "--verify", `${ref ?? lastBenchCommit()}^{commit}`);
  const other = join(process.env.BENCH_TMPDIR ?? tmpdir(), `skein-guard-${commit.slice(0, 12)}`);
  if (!existsSync(other)) git("worktree", "add", "--detach", other, commit);
  try {
    if (!existsSync(join(other, "node_modules"))) symlinkSync(join(root, "node_modules"), join(other, "node_modules"));
    const lock = (dir: string) => readFileSync(join(dir, "package-lock.json"), "utf8");
    if (lock(other) !== lock(root)) progress(`guard: ${commit.slice(0, 8)} locks other dependencies; it runs on these`);
    const before: number[] = [];
    const after: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const sides = [
        { name: commit.slice(0, 8), dir: other, samples: before },
        { name: "this checkout", dir: root, samples: after },
      ];
      if (r % 2 === 1) sides.reverse();
      for (const side of sides) {
        const us = await measure(side.dir);
        side.samples.push(us);
        progress(`guard: round ${r + 1}, ${side.name}: ${us.toFixed(0)} µs a run`);
      }
    }
    const changePct = (percentile(after, 50) / percentile(before, 50) - 1) * 100;
    return { commit, before, after, changePct };
  } finally {
    git("worktree", "remove", "--force", other);
  }
}

/** The commit that last wrote bench/results/latest.json: the last full bench run. */
function lastBenchCommit(): string {
  return git("log", "-1", "--format=%H", "--", "bench/results/latest.json");
}

/** Run as `npm run bench:guard`: the comparison as a table. */
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const g = await guard(process.argv[2]);
  const dirty = git("status", "--porcelain") ? ", with uncommitted changes" : "";
  const ok = g.changePct <= MAX_CHANGE_PCT;
  const rows = [
    "| checkout | dag8 CPU µs a run (median) | every round |",
    "| --- | ---: | --- |",
    `| ${g.commit.slice(0, 8)} (before) | ${round(percentile(g.before, 50))} | ${g.before.map((x) => x.toFixed(0)).join(", ")} |`,
    `| ${git("rev-parse", "--short=8", "HEAD")} (this checkout${dirty}) | ${round(percentile(g.after, 50))} | ${g.after.map((x) => x.toFixed(0)).join(", ")} |`,
    `| change | ${g.changePct.toFixed(1)} % | at most ${MAX_CHANGE_PCT} %: ${ok ? "yes" : "**NO**, say why in the issue's note"} |`,
  ];
  process.stdout.write(`${rows.join("\n")}\n`);
  if (!ok) process.exitCode = 1;
}
