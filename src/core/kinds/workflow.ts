/**
 * `workflow`'s states (DESIGN §11.1): `begin` only asks for the child: the flush
 * (engine/writer/kinds/children.ts) resolves the workflow, claims the visit for
 * `run:<child run id>` and inserts the child in the same transaction.
 */
import type { KindStates } from "./kind.js";

/** The holder of an attempt held by a child run. */
export const CHILD_HOLDER = "run:";

/** The child run that holds an attempt, or null. */
export function childOf(holder: string | null): string | null {
  return holder?.startsWith(CHILD_HOLDER) ? holder.slice(CHILD_HOLDER.length) : null;
}

export const workflow: KindStates = {
  begin(rs, v) {
    rs.changes.starts.add(v);
  },
};
