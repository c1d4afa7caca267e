/**
 * A map node's progress in words (DESIGN §11.1): `map 37/100: 35 succeeded, 2 failed, 4 running,
 * 59 pending`, where 37 is how many items have ended. States with no items are left out, but
 * for succeeded, which always shows.
 */
import type { MapCounts } from "../index.js";

export function mapNote(c: MapCounts): string {
  const pending = Math.max(0, c.total - c.running - c.succeeded - c.failed - c.cancelled);
  const ended = c.succeeded + c.failed + c.cancelled;
  const parts = [`${c.succeeded} succeeded`];
  if (c.failed > 0) parts.push(`${c.failed} failed`);
  if (c.cancelled > 0) parts.push(`${c.cancelled} cancelled`);
  if (c.running > 0) parts.push(`${c.running} running`);
  if (pending > 0) parts.push(`${pending} pending`);
  return `map ${ended}/${c.total}: ${parts.join(", ")}`;
}

/** A visit's note: its map progress when it has items, with its error or wait after it. */
export function withMapNote(items: MapCounts | null, note: string): string {
  if (items === null) return note;
  return note === "" ? mapNote(items) : `${mapNote(items)}; ${note}`;
}
