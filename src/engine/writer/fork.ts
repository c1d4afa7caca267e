/**
 * A `fork` input (DESIGN §16): a new run that keeps what a source run did before a node, built
 * from the source as this transaction reads it (finished or still running), with the kept
 * visits' durable steps copied to it. The source is read, never changed. Applied again after a
 * commit whose outcome was lost, it answers the run that commit may have written.
 */
import { forkRunState } from "../../core/fork.js";
import { ConflictError, NotFoundError } from "../../errors.js";
import type { FlushContext } from "./context.js";
import type { Input } from "./inputs.js";

export async function fork(f: FlushContext, input: Extract<Input, { kind: "fork" }>): Promise<void> {
  const { run, done } = input;
  const committed = f.lost ? await f.load(run.run_id) : undefined;
  if (committed) return f.answer(committed, done);
  const source = await f.load(input.run_id);
  if (!source) return done.reject(new NotFoundError(`run ${input.run_id} does not exist`));
  if (source.run.parent !== null) {
    // Checked before queueing too; this is the transaction's own word.
    return done.reject(
      new ConflictError(`run ${input.run_id} is a child run of run ${source.run.parent.run_id}; fork its root run`),
    );
  }
  const { graph } = await f.o.registry.get(run.workflow_id, run.workflow_version);
  let forked: ReturnType<typeof forkRunState>;
  try {
    forked = forkRunState(
      source,
      run,
      graph,
      { from: input.from, payloads: input.payloads, input_edited: input.input_edited },
      f.now,
    );
  } catch (e) {
    return done.reject(e);
  }
  f.addRun(forked.rs, 0);
  for (const { node_id, visit } of forked.kept) {
    f.copySteps({ run_id: source.run.run_id, node_id, visit }, { run_id: run.run_id, node_id, visit });
  }
  f.answer(forked.rs, done);
}
