/**
 * A `start` input: a run a caller starts, in the flush's transaction. Its idempotency key
 * answers the run it started before (or refuses another workflow or input under it); applied
 * again after a commit whose outcome was lost, it answers the run that commit may have written.
 */
import { startRunState } from "../../core/scheduler.js";
import type { Run, StartFlow } from "../../core/types.js";
import { ConflictError } from "../../errors.js";
import type { FlushContext } from "./context.js";
import type { Callback } from "./inputs.js";
import type { RunKeys } from "./run-keys.js";

/** Starts `run` (or finds it) and answers `done` once the transaction commits. */
export async function startRun(
  f: FlushContext,
  run: Run,
  flow: StartFlow | null,
  keys: RunKeys,
  done: Callback<Run>,
): Promise<void> {
  // Applied again after a commit whose outcome was lost: the run may exist already.
  const committed = f.lost ? await f.load(run.run_id) : undefined;
  if (committed) {
    const existing = { ...committed.run };
    f.out.callbacks.push(() => done.resolve(existing));
    return;
  }
  if (run.idempotency_key !== null) {
    const existing =
      f.newRuns.find((r) => r.idempotency_key === run.idempotency_key) ??
      (await f.tx.runByIdempotencyKey(run.idempotency_key));
    if (existing) {
      if (existing.input_hash !== run.input_hash || existing.workflow_id !== run.workflow_id) {
        f.out.callbacks.push(() =>
          done.reject(
            new ConflictError(
              `idempotency_key "${run.idempotency_key}" was already used for run ${existing.run_id} with a different ` +
                "workflow or input; use a new key for a new run",
            ),
          ),
        );
      } else {
        f.out.callbacks.push(() => done.resolve(existing));
      }
      return;
    }
  }
  if (flow) return keys.start(run, flow, done);
  const { graph } = await f.o.registry.get(run.workflow_id, run.workflow_version);
  const rs = startRunState(run, graph, f.now);
  f.addRun(rs, 0);
  const started = { ...rs.run };
  f.out.callbacks.push(() => done.resolve(started));
}
