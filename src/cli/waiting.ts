/**
 * What a WAITING node waits for, in words (DESIGN §3, §11): `event "paid" (key o-1), until
 * <timeout>` for a wait_event, `until <time>` for a sleep. Read from the stored visit (its
 * resolved payload and due time) or from its `node.waiting` event, which carries the same.
 * A ready node that getRun says waits for something (`waiting`: an agent nothing serves) says that.
 */
import type { Json } from "../index.js";

export function waitNote(what: { event?: Json; key?: Json; until?: Json }): string {
  const until = typeof what.until === "number" ? `until ${new Date(what.until).toISOString()}` : "";
  if (typeof what.event !== "string") return until;
  const key = typeof what.key === "string" ? ` (key ${what.key})` : "";
  return `event "${what.event}"${key}${until === "" ? "" : `, ${until}`}`;
}

/** The note of a stored visit that is WAITING, or that getRun says waits (`waiting`); null for any other. */
export function visitWaitNote(v: {
  state: string;
  payload: Json;
  lease_expires_at: number | null;
  waiting?: { message: string };
}): string | null {
  if (v.waiting) return v.waiting.message;
  if (v.state !== "WAITING") return null;
  const p = v.payload !== null && typeof v.payload === "object" && !Array.isArray(v.payload) ? v.payload : {};
  return waitNote({ event: p.event ?? null, key: p.key ?? null, until: v.lease_expires_at });
}
