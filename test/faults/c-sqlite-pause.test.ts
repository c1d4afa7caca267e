/**
 * Case c (issue 14 item 6; FAULT-PLAN 6): an engine on a SQLite file is SIGSTOPped mid-work for
 * longer than the engine timeout (a laptop lid, a VM pause, a debugger); meanwhile a second
 * engine process tries to open the file; then the first gets SIGCONT. While the first process
 * lives it owns the file: the second must be refused, and the first finishes every run with no
 * attempt run twice.
 */
import { join } from "node:path";
import { expect, it } from "vitest";
import { computeOracles, readOutcome, readSink, reportLine } from "./oracles.js";
import {
  acknowledged,
  caseRng,
  engineProcess,
  faultDir,
  faultMoment,
  finalCount,
  pollUntil,
  unfinished,
} from "./setup.js";
import { FAN } from "./workflows.js";

const RUNS = 30;
/** Short heartbeats and timeout, so that a pause of a few seconds is well past it. */
const ENGINE = { maxConcurrency: 10, heartbeatIntervalMs: 200, engineTimeoutMs: 1000, sweepIntervalMs: 200 };

it("c: a SIGSTOPped SQLite engine keeps its file; a second engine is refused", async () => {
  const rng = caseRng();
  const dir = faultDir();
  const database = `sqlite:${join(dir, "skein.db")}`;
  const sink = join(dir, "sink.log");
  const slow = { ...FAN, nodes: FAN.nodes.map((n) => ({ ...n, payload: { ms: 300 } })) };
  const start = Array.from({ length: RUNS }, (_, i) => ({ workflow_id: FAN.id, input: { i }, key: `c-${i}` }));
  const first = engineProcess(rng, { database, sink, workflows: [slow], start, engine: ENGINE });
  await first.waitFor("ready", (m) => m.type === "ready");
  await pollUntil("some runs started", 20_000, () =>
    first.messages.filter((m) => m.type === "started").length === RUNS ? true : undefined,
  );
  await pollUntil("attempts in flight", 20_000, () => (readSink(sink).length >= rng.int(10, 30) ? true : undefined));

  first.proc.kill("SIGSTOP");
  await faultMoment(ENGINE.engineTimeoutMs * 2 + rng.int(0, 1000)); // the pause: past the engine timeout
  const second = engineProcess(rng, { database, sink, engine: ENGINE });
  // Opened (it printed ready), or refused (it exited first); hanging is neither.
  const opened = await second
    .waitFor("ready", (m) => m.type === "ready")
    .then(
      () => true,
      (e: unknown) => {
        if (second.alive) throw e;
        return false;
      },
    );
  first.proc.kill("SIGCONT");

  // T_max: every attempt is 300 ms; the second engine, if it opened, runs beside the first.
  await pollUntil(
    "every run final",
    25_000,
    async () => ((await finalCount(database)) >= RUNS ? true : undefined),
    () => unfinished(database, rng, [first, second]),
  );
  await Promise.all([first.kill(), second.kill()]);

  const { history, sink: effects } = await readOutcome(database, sink);
  const figures = computeOracles(history, effects, [...acknowledged([first]).values()]);
  reportLine(
    "c sqlite-pause",
    figures,
    rng.seed,
    opened ? "the second engine OPENED the paused engine's file" : "the second engine was refused",
  );
  expect(figures.problems).toEqual([]);
  expect({ lost: figures.lost, doubled: figures.doubled, stale: figures.stale }).toEqual({
    lost: 0,
    doubled: 0,
    stale: 0,
  });
  expect(opened, "a second engine opened the file of a paused, living engine").toBe(false);
  expect(second.errors).toMatch(/in use|lock/i);
}, 50_000);
