/**
 * An engine process of the PostgreSQL recovery bench (pg-recovery.ts), default options:
 * `node --import tsx bench/pg-recovery-child.ts <url> <victim|survivor> <runs>`.
 * - victim: starts `runs` runs of pg-recovery-work, whose agent never returns, and reports
 *   `{"type":"ready","executions":[...]}` once every handler was called; then waits to be SIGKILLed.
 * - survivor: starts `runs` runs of pg-recovery-busy (its own attempts in flight, never
 *   returning) and reports `{"type":"ready"}` once they all run; then answers every `work`
 *   attempt at once, reporting `{"type":"rerun","execution_id","attempt","at"}` (at: wallNow).
 * Either exits when its stdin closes.
 */
import { createEngine, type Task } from "../src/index.js";
import { report, serveCommands } from "./children.js";
import { wallNow } from "./lib.js";

const [url, role, runsArg] = process.argv.slice(2);
if (!url || (role !== "victim" && role !== "survivor") || !runsArg) {
  throw new Error("usage: pg-recovery-child.ts <url> <victim|survivor> <runs>");
}
const runs = Number(runsArg);

/** One node of `type`, never retried: a re-run is the recovery's alone. */
function oneNode(type: string) {
  return {
    id: `pg-recovery-${type}`,
    defaults: { retry_count: 0, timeout: 300 },
    nodes: [{ node_id: "n", agent_type: type }],
  };
}

const executions: { execution_id: string; attempt: number }[] = [];
let ready = false;
const inFlight = (task: Task) => {
  executions.push({ execution_id: task.execution_id, attempt: task.attempt });
  if (!ready && executions.length === runs) {
    ready = true;
    report(role === "victim" ? { type: "ready", executions } : { type: "ready" });
  }
  return new Promise<never>(() => {});
};

const engine = await createEngine({
  database: url,
  maxConcurrency: 1000,
  agents:
    role === "victim"
      ? { work: inFlight }
      : {
          busy: inFlight,
          work: (task) => {
            report({ type: "rerun", execution_id: task.execution_id, attempt: task.attempt, at: wallNow() });
            return { ok: true };
          },
        },
});
const workflow = oneNode(role === "victim" ? "work" : "busy");
await engine.registerWorkflow(workflow);
for (let i = 0; i < runs; i++) await engine.startRun(workflow.id, { input: { i } });
serveCommands(
  async () => {},
  async () => {
    await engine.close({ timeoutMs: 100 });
    process.exit(0);
  },
);
