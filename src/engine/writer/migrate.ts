/**
 * The `migrate` input (DESIGN §16, Engine.migrateRuns): each run, locked as the flush began, is
 * checked again as it is now (an answer read before may be stale) and moved to the new version
 * by core/upgrade.ts, or left unchanged with every reason. The moved run's state keeps the new
 * graph, so the run cache holds it with that graph after commit.
 */
import { requestRefusal, upgrade, upgradeRefusals } from "../../core/upgrade.js";
import type { FlushContext } from "./context.js";
import type { Input, MigrateAnswer } from "./inputs.js";

export async function migrate(f: FlushContext, input: Extract<Input, { kind: "migrate" }>): Promise<void> {
  const { request } = input;
  const { graph } = await f.o.registry.get(request.workflow_id, request.to_version);
  const answer: MigrateAnswer = { moved: [], incompatible: [] };
  for (const { run_id, version } of input.runs) {
    const rs = await f.load(run_id);
    if (!rs) {
      answer.incompatible.push({ run_id, from_version: version, reasons: ["the run no longer exists"] });
      continue;
    }
    const from_version = rs.run.workflow_version;
    if (from_version === request.to_version && version < request.to_version) {
      // Moved since it was read: by this input, applied again after a commit whose outcome was lost, or by another call.
      answer.moved.push({ run_id, from_version: version });
      continue;
    }
    const refused = requestRefusal(rs.run, request);
    const reasons = refused === null ? upgradeRefusals(rs, graph) : [refused];
    if (reasons.length > 0) {
      answer.incompatible.push({ run_id, from_version, reasons });
      continue;
    }
    upgrade(rs, graph, request.to_version, f.now);
    answer.moved.push({ run_id, from_version });
  }
  f.out.callbacks.push(() => input.done.resolve(answer));
}
