/**
 * xproc_dispatch (postgres section, `xproc_dispatch_p50_ms`, p99): how long a node made ready by
 * one engine process takes to start in another. Two engine processes on one fresh schema
 * (pg-xproc-child.ts): A serves only `xp_first`, B only `xp_second` (workloads.ts XPROC: `second`
 * depends on `first`). The parent starts one run at a time through a `createClient` and waits
 * for B to report the run's end before starting the next.
 *
 * A claims `first` (woken by the client's NOTIFY) and runs it. Its handler notes the time just
 * before it returns. A's next flush records the success, which makes `second` ready; A has no
 * handler for it, so it leaves it in the table, NOTIFYs, and commits. B, woken by the
 * notification, claims `second` in a transaction of its own, commits, and calls its handler,
 * which notes the time at its first line. A sample is B's time minus A's: the result check, A's
 * transaction, the NOTIFY's delivery, B's transaction and the dispatch. meta also gives the time
 * from A's commit (A publishing first's node.succeeded, just after its COMMIT returned) to B's
 * handler.
 *
 * The clock: each process reads epoch ms as performance.timeOrigin + performance.now() (lib.ts
 * wallNow). Before measuring, the parent asks each child for its time 20 times and checks that it
 * falls between the parent's own times of asking and hearing back (meta clock_skew_bound_ms: the
 * largest amount by which a child's time fell outside; 0 when the clocks agree to within the
 * round trip). Warm-up 20 runs, then 200.
 */
import { createClient } from "../src/index.js";
import { BenchChild, type Message } from "./children.js";
import { type Measured, percentile, progress, wallNow } from "./lib.js";
import { tempSchema } from "./postgres.js";
import { XPROC } from "./workloads.js";

type Stamp = Message & { run_id: string; at: number };

export async function benchXproc(samples = 200, warmup = 20): Promise<Measured> {
  const db = tempSchema("xproc");
  const children: BenchChild[] = [];
  try {
    const client = await createClient({ database: db.url });
    try {
      await client.registerWorkflow(XPROC);
      const a = new BenchChild("xproc engine A (first)", "bench/pg-xproc-child.ts", [db.url, "first"]);
      const b = new BenchChild("xproc engine B (second)", "bench/pg-xproc-child.ts", [db.url, "second"]);
      children.push(a, b);
      await Promise.all(children.map((c) => c.take("ready", 60_000)));
      const skew = Math.max(await clockSkew(a), await clockSkew(b));

      const fromReturn: number[] = [];
      const fromCommit: number[] = [];
      for (let i = 0; i < warmup + samples; i++) {
        const run = await client.startRun(XPROC.id);
        const ended = await b.take<Message & { run_id: string; status: string }>("ended", 10_000);
        const returned = await a.take<Stamp>("returned", 10_000);
        const committed = await a.take<Stamp>("committed", 10_000);
        const called = await b.take<Stamp>("called", 10_000);
        const ids = [ended, returned, committed, called].map((m) => m.run_id);
        if (ids.some((id) => id !== run.run_id)) throw new Error(`xproc: reports of other runs: ${ids.join(", ")}`);
        if (ended.status !== "run.succeeded") throw new Error(`xproc: run ended ${ended.status}`);
        if (i < warmup) continue;
        fromReturn.push(called.at - returned.at);
        fromCommit.push(called.at - committed.at);
      }
      progress(`xproc: ${fromReturn.length} runs across two engine processes`);
      return {
        metrics: {
          xproc_dispatch_p50_ms: percentile(fromReturn, 50),
          xproc_dispatch_p99_ms: percentile(fromReturn, 99),
        },
        meta: {
          xproc: {
            runs: fromReturn.length,
            warmup_runs: warmup,
            from_commit_p50_ms: percentile(fromCommit, 50),
            from_commit_p99_ms: percentile(fromCommit, 99),
            clock_skew_bound_ms: skew,
          },
        },
      };
    } finally {
      await client.close();
    }
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await db.cleanup();
  }
}

/** How far a child's clock reads fell outside the parent's [asked, heard back] interval, at worst. */
async function clockSkew(child: BenchChild): Promise<number> {
  let worst = 0;
  for (let i = 0; i < 20; i++) {
    const asked = wallNow();
    child.send({ cmd: "clock" });
    const { at } = await child.take<Message & { at: number }>("clock", 5_000);
    const heard = wallNow();
    worst = Math.max(worst, asked - at, at - heard);
  }
  return worst;
}
