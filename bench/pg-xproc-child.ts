/**
 * One of the two engine processes of the xproc bench (xproc.ts):
 * `node --import tsx bench/pg-xproc-child.ts <postgres url with ?schema=...> first|second`.
 *
 * `first` serves only the agent type `xp_first`, `second` only `xp_second`. Times are epoch ms on
 * the clock both processes share (lib.ts wallNow). It prints, as JSON lines:
 * - `ready` once its engine is open;
 * - first: `returned` (run_id, at: just before its handler returns) and `committed` (run_id, at:
 *   when its engine publishes `first`'s node.succeeded, just after that transaction committed);
 * - second: `called` (run_id, at: the first line of its handler) and `ended` (run_id, status)
 *   when it ends the run;
 * - `clock` (at) for each `{"cmd":"clock"}`, so the parent can check the shared clock.
 * When stdin closes, the engine is closed and the process exits.
 */
import { createEngine } from "../src/index.js";
import { report, serveCommands } from "./children.js";
import { wallNow } from "./lib.js";

const url = process.argv[2];
const role = process.argv[3];
if (!url || (role !== "first" && role !== "second")) {
  throw new Error("usage: pg-xproc-child.ts <postgres url with ?schema=...> first|second");
}

const engine = await createEngine({
  database: url,
  agents:
    role === "first"
      ? {
          xp_first: (task) => {
            report({ type: "returned", run_id: task.run_id, at: wallNow() });
            return { ok: true };
          },
        }
      : {
          xp_second: (task) => {
            const at = wallNow();
            report({ type: "called", run_id: task.run_id, at });
            return { ok: true };
          },
        },
});
engine.subscribe((e) => {
  if (role === "first" && e.type === "node.succeeded" && e.node_id === "first") {
    report({ type: "committed", run_id: e.run_id, at: wallNow() });
  }
  if (role === "second" && (e.type === "run.succeeded" || e.type === "run.failed" || e.type === "run.cancelled")) {
    report({ type: "ended", run_id: e.run_id, status: e.type });
  }
});
report({ type: "ready", pid: process.pid });

serveCommands(
  async (command) => {
    if (command.cmd !== "clock") throw new Error(`unknown command ${JSON.stringify(command)}`);
    report({ type: "clock", at: wallNow() });
  },
  async () => {
    await engine.close();
    process.exit(0);
  },
);
