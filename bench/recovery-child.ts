/**
 * The engine that dies, for the recovery bench: `node --import tsx bench/recovery-child.ts <db path>`.
 * Its agent never returns. It starts 200 runs, waits until all 200 `node.started` events are
 * committed and all 200 handlers invoked, prints one JSON line `{"ready":true,"executions":[...]}`
 * (execution_id and attempt as the handlers saw them) and waits to be SIGKILLed.
 */
import { createEngine } from "../src/index.js";
import { RECOVERY } from "./workloads.js";

const path = process.argv[2];
const runs = Number(process.argv[3] ?? 200);
if (!path) throw new Error("usage: recovery-child.ts <db path> [runs]");

const executions: { execution_id: string; attempt: number }[] = [];
let started = 0;
let reported = false;
const report = () => {
  if (reported || started < runs || executions.length < runs) return;
  reported = true;
  process.stdout.write(`${JSON.stringify({ ready: true, executions })}\n`);
};

const engine = await createEngine({
  database: `sqlite:${path}`,
  maxConcurrency: 1000,
  agents: {
    work: (task) => {
      executions.push({ execution_id: task.execution_id, attempt: task.attempt });
      report();
      return new Promise(() => {}); // never settles: the attempt is in flight when we are killed
    },
  },
});
engine.subscribe((e) => {
  if (e.type === "node.started" && e.node_id === "first") started += 1;
  report();
});
await engine.registerWorkflow(RECOVERY);
await Promise.all(Array.from({ length: runs }, () => engine.startRun(RECOVERY.id)));
// Stay alive until the parent kills us; if the parent dies first, its end of our stdin closes.
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
