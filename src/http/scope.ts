/**
 * Token scopes by workflow (DESIGN §13): a token with `workflows: ["order-*", "refund"]` sees,
 * starts, decides and streams only runs of the workflows those patterns match. `*` is the only
 * wildcard (any run of characters); everything else matches itself.
 *
 * Routes that honour scopes say so (`config.scoped`); a scoped token calling any other route is
 * refused (403), so a route that forgets to filter fails closed. Runs and workflows out of scope
 * are answered 404 like unknown ones, so a scoped token cannot tell them from ids that do not exist.
 */

import { WORKFLOW_PATTERN } from "../core/scope.js";
import type { Reservations } from "../core/types.js";
import type { Engine } from "../engine/engine.js";
import { NotFoundError } from "../errors.js";
import type { Principal } from "./principal.js";

export { WorkflowScope } from "./principal.js";
export { WORKFLOW_PATTERN };

/** True when the caller may see runs of this workflow (always, without a scoped token). */
export function inScope(principal: Principal | null, workflowId: string): boolean {
  return principal?.workflows?.allows(workflowId) ?? true;
}

/**
 * The workflow ids among `ids` that the caller may see; null when unscoped (all of them).
 */
export function idsInScope(principal: Principal | null, ids: readonly string[]): string[] | null {
  const scope = principal?.workflows;
  return scope ? ids.filter((id) => scope.allows(id)) : null;
}

/** @throws NotFoundError, worded as for a run that does not exist, when the run is out of scope */
export function assertRunInScope(principal: Principal | null, run: { run_id: string; workflow_id: string }): void {
  if (!inScope(principal, run.workflow_id)) {
    throw new NotFoundError(`run ${run.run_id} does not exist; check the run id and the database`);
  }
}

/** Reads the run only for a scoped token. @throws NotFoundError when such a token may not see it (or it does not exist) */
/** A scoped token's patterns resolved to the registered workflows they match; null when unscoped. */
export async function visibleWorkflowIds(engine: Engine, principal: Principal | null): Promise<string[] | null> {
  if (!principal?.workflows) return null;
  return idsInScope(
    principal,
    (await engine.listWorkflows()).map((w) => w.id),
  );
}

export async function checkRunScope(engine: Engine, principal: Principal | null, runId: string): Promise<void> {
  if (principal?.workflows) assertRunInScope(principal, await engine.getRun(runId));
}

/** What a scoped token reads in place of a child run id it may not see. */
export const HIDDEN_RUN = "[run out of scope]";

/**
 * `value` with every mention of these run ids replaced by HIDDEN_RUN (a holder `run:<id>`, an
 * error's `details.run_id`, a message naming the child): a run in a scoped token's scope may
 * have a child out of it (started for an unscoped caller), whose id is not the token's to learn.
 */
export function hideRuns<T>(value: T, ids: readonly string[]): T {
  if (ids.length === 0) return value;
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return ids.reduce((s, id) => (s.includes(id) ? s.replaceAll(id, HIDDEN_RUN) : s), v);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === "object") {
      const hidden = hiddenChildError(v, ids);
      if (hidden) return hidden;
      // A child.ended event's data names the child and carries its error: how it ended stays, its error does not.
      const named = (v as { run_id?: unknown }).run_id;
      const entries = Object.entries(v).filter(
        ([k]) => !(k === "error" && typeof named === "string" && ids.includes(named)),
      );
      return Object.fromEntries(entries.map(([k, x]) => [k, walk(x)]));
    }
    return v;
  };
  return walk(value) as T;
}

/**
 * An error that carries a hidden child's (a visit's `child_failed`, the run's error wrapping it:
 * `details.run_id`), told without the child's own error, whose message and `details.error` are
 * that run's, out of scope: which workflow (the reader's own definition names it) and how it
 * ended stay. Null for any other value.
 */
function hiddenChildError(v: object, ids: readonly string[]): object | null {
  const e = v as { message?: unknown; reason?: unknown; details?: Record<string, unknown> };
  const runId = e.details?.run_id;
  if (typeof e.message !== "string" || typeof runId !== "string" || !ids.includes(runId)) return null;
  const childMessage = (e.details?.error as { message?: unknown } | null | undefined)?.message;
  let message = typeof childMessage === "string" ? e.message.replace(`: ${childMessage}`, "") : e.message;
  message = message.replaceAll(runId, HIDDEN_RUN);
  return { message, reason: e.reason, details: { run_id: HIDDEN_RUN, status: e.details?.status } };
}

/**
 * The run as a scoped token reads it: `reserved` keeps the entries of the run's own attempts and
 * sums those of the runs below it (their keys name their execution ids, which a scoped token may
 * not be told) under one key, HIDDEN_RUN. Unscoped callers read the run as stored.
 */
export function runForReader<T extends { run_id: string; reserved?: Reservations | null }>(
  principal: Principal | null,
  run: T,
): T {
  if (!principal?.workflows || !run.reserved) return run;
  const reserved: Reservations = {};
  for (const [key, r] of Object.entries(run.reserved)) {
    if (key.startsWith(`${run.run_id}:`)) {
      reserved[key] = r;
      continue;
    }
    const below = reserved[HIDDEN_RUN] ?? { tokens: 0, cost: 0 };
    reserved[HIDDEN_RUN] = { tokens: below.tokens + r.tokens, cost: below.cost + r.cost };
  }
  return { ...run, reserved };
}

/** The ids of the run's child runs a scoped token may not see (none for an unscoped caller). */
export async function childrenOutOfScope(
  engine: Engine,
  principal: Principal | null,
  run: string | { children: readonly { run_id: string; workflow_id: string }[] },
): Promise<string[]> {
  if (!principal?.workflows) return [];
  const { children } = typeof run === "string" ? await engine.getRun(run) : run;
  return children.filter((c) => !inScope(principal, c.workflow_id)).map((c) => c.run_id);
}

/** Run ids an event names as a child (a `node.started` holder `run:<id>`, a `child_failed` error's run_id). */
export function childIdsOf(data: unknown): string[] {
  const d = data as { holder?: unknown; error?: { details?: { run_id?: unknown } } } | null;
  const ids: string[] = [];
  if (typeof d?.holder === "string" && d.holder.startsWith("run:")) ids.push(d.holder.slice(4));
  const child = d?.error?.details?.run_id;
  if (typeof child === "string") ids.push(child);
  return ids;
}
