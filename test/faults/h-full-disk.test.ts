/**
 * Case h (issue 14 item 8; FAULT-PLAN 5): the SQLite file of a served engine lives on a small
 * tmpfs (mounted here, as root) that a filler file makes full while runs are in flight and new
 * ones are asked for over HTTP. While full, a start is a 503 with Retry-After (never a 500) and
 * /v1/ready says not ready; nothing acknowledged is lost; once the filler is gone everything
 * resumes, including the results agents returned while the disk was full, well before any
 * attempt timeout (60 s here, so a dropped result shows as a run not final by T_max).
 */
import { execFileSync } from "node:child_process";
import { appendFileSync, closeSync, mkdirSync, openSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { expect, it } from "vitest";
import { createServer } from "../../src/http/server.js";
import { type AgentHandler, createEngine, type Task } from "../../src/index.js";
import { computeOracles, readOutcome, reportLine } from "./oracles.js";
import { caseRng, faultDir, faultMoment, onCleanup, pollUntil } from "./setup.js";

const CHAIN = {
  id: "fault-chain",
  defaults: { retry_count: 3, retry_interval: 0.05, timeout: 60 },
  nodes: [
    { node_id: "a", agent_type: "work" },
    { node_id: "b", agent_type: "work", depends_on: ["a"] },
    { node_id: "c", agent_type: "work", depends_on: ["b"] },
  ],
};

/** Fills the file system of `file` until it refuses a write; returns the bytes written. */
function fill(file: string): number {
  const fd = openSync(file, "w");
  const chunk = Buffer.alloc(64 * 1024, 1);
  let written = 0;
  try {
    for (;;) written += writeSync(fd, chunk);
  } catch (e) {
    if ((e as { code?: string }).code !== "ENOSPC") throw e;
  } finally {
    closeSync(fd);
  }
  return written;
}

it("h: a full disk under a served SQLite engine", async () => {
  const rng = caseRng();
  const dir = faultDir();
  const disk = join(dir, "disk");
  mkdirSync(disk);
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=16m", "tmpfs", disk]);
  onCleanup(() => {
    execFileSync("umount", ["-l", disk]);
  });
  const database = `sqlite:${join(disk, "skein.db")}`;
  const sink = join(dir, "sink.log");
  const work: AgentHandler = async (t: Task) => {
    const line = (phase: string) =>
      `${JSON.stringify({ phase, run_id: t.run_id, node_id: t.node_id, execution_id: t.execution_id, attempt: t.attempt, pid: process.pid, by: "test" })}\n`;
    appendFileSync(sink, line("start"));
    await new Promise((resolve) => setTimeout(resolve, rng.int(50, 300)));
    appendFileSync(sink, line("done"));
    return { node: t.node_id };
  };
  // Silent: every write refused while the disk is full is logged as an error.
  const engine = await createEngine({
    database,
    agents: { work },
    maxConcurrency: 8,
    logger: pino({ level: "silent" }),
  });
  onCleanup(() => engine.close({ timeoutMs: 100 }));
  const app = await createServer({ engine });
  onCleanup(() => app.close());
  const base = await app.listen({ host: "127.0.0.1", port: 0 });
  await engine.registerWorkflow(CHAIN);

  const acked: string[] = [];
  const answers: { phase: string; status: number; retryAfter: string | null }[] = [];
  const start = async (phase: string, i: number) => {
    const res = await fetch(`${base}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ workflow_id: CHAIN.id, input: { phase, i } }),
    });
    const body = (await res.json()) as { run_id?: string };
    answers.push({ phase, status: res.status, retryAfter: res.headers.get("retry-after") });
    if (res.status === 201 && body.run_id) acked.push(body.run_id);
  };
  const ready = async () => (await fetch(`${base}/v1/ready`)).status;

  for (let i = 0; i < 20; i++) await start("before", i);
  const filler = join(disk, "filler");
  const filled = fill(filler);
  const readyWhileFull = await ready();
  for (let i = 0; i < 20; i++) {
    await start("full", i);
    await faultMoment(rng.int(20, 100)); // the disk stays full while results come back
  }
  const readyWhileFull2 = await ready();
  unlinkSync(filler);
  // Space is back: the server says ready again (bounded), and then starts are accepted.
  const readyAgain = await pollUntil("ready again", 15_000, async () => ((await ready()) === 200 ? true : undefined))
    .then(() => true)
    .catch(() => false);
  for (let i = 0; i < 5; i++) await start("after", i);

  // T_max: a few seconds of work, far below the 60 s attempt timeout that would re-run a dropped result.
  const finished = await pollUntil("every acknowledged run final", 20_000, async () => {
    const runs = await Promise.all(acked.map((id) => engine.getRun(id)));
    return runs.every((r) => r.status !== "RUNNING") ? true : undefined;
  }).catch(() => false);
  const readyAfter = await ready();
  const { history, sink: effects } = await readOutcome(database, sink);
  const figures = computeOracles(history, effects, acked);
  const during = answers.filter((a) => a.phase === "full");
  const count = (s: number) => during.filter((a) => a.status === s).length;
  const others = during.filter((a) => a.status !== 201 && a.status !== 503).map((a) => a.status);
  reportLine(
    "h full-disk",
    figures,
    rng.seed,
    `filled ${Math.round(filled / 1024)} KiB; while full: ${count(201)} started, ${count(503)} answered 503, ${others.length} other (${[...new Set(others)].join(", ") || "none"}), ready ${readyWhileFull}/${readyWhileFull2}; after: ready ${readyAgain ? "again" : "NEVER again"}, ${answers.filter((a) => a.phase === "after" && a.status === 201).length} of 5 started${finished ? "" : ", NOT every run final"}`,
  );
  expect(readyAgain, "/v1/ready never said ready once space was back").toBe(true);
  expect(answers.filter((a) => a.phase !== "full").map((a) => a.status)).toEqual(Array(25).fill(201));
  expect(filled).toBeGreaterThan(0);
  expect(others, "answers while the disk was full other than 201 and 503").toEqual([]);
  expect(count(503), "no start was answered 503 while the disk was full").toBeGreaterThan(0);
  expect(during.filter((a) => a.status === 503).every((a) => a.retryAfter !== null)).toBe(true);
  expect(readyWhileFull2).toBe(503);
  expect(readyAfter).toBe(200);
  expect(figures.problems).toEqual([]);
  expect({ lost: figures.lost, doubled: figures.doubled, stale: figures.stale }).toEqual({
    lost: 0,
    doubled: 0,
    stale: 0,
  });
}, 50_000);
