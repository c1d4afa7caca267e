/**
 * `sleep`'s states (DESIGN §11.4): WAITING until its due time (definition/kinds/sleep.ts
 * `dueTime`), kept as the visit's `lease_expires_at` from the transaction's time, so it survives
 * restarts and costs the engine nothing while it waits; the sweep or the wake-up timer finishes it.
 */
import { dueTime } from "../../definition/kinds/sleep.js";
import { nodeOf, wait } from "../run-state.js";
import type { KindStates } from "./kind.js";

export const sleep: KindStates = {
  begin(rs, v, now, _prepared, moves) {
    const until = dueTime(v.payload, now);
    if (typeof until === "string") {
      moves.failVisit(rs, v, "template_error", { message: `payload ${until}`, reason: "template_error" }, now);
      return;
    }
    wait(rs, v, until, now);
    if (until <= now) this.due?.(rs, v, now, moves);
  },
  due(rs, v, now, moves) {
    const until = v.lease_expires_at ?? now;
    const node = nodeOf(rs, v.node_id);
    moves.succeed(
      rs,
      v,
      { slept_until: new Date(until).toISOString() },
      { kind: "targets", targets: [...node.successTargets] },
      now,
    );
  },
};
