/** Progress values (DESIGN §15): what makes one a text delta, which streams join instead of replace. */
import type { Json } from "./types.js";

/** A text delta: `{ delta: string, ... }` (the `llm` node's `{ delta }`, an agent turn's `{ turn, delta }`). */
export type TextDelta = { delta: string; [field: string]: Json };

export function isTextDelta(value: Json): value is TextDelta {
  return (
    value !== null &&
    typeof value === "object" &&
    !Array.isArray(value) &&
    typeof (value as { delta?: unknown }).delta === "string"
  );
}
