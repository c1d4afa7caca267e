/** JSON checks at the engine's boundaries: handler outputs, run inputs, canonical hashing. */
import { createHash } from "node:crypto";

/** Where `value` stops being plain JSON (a function, a class instance, NaN, a cycle...), or null when it is JSON. */
export function jsonProblem(value: unknown, path = "output", seen = new Set<object>()): string | null {
  if (value === null || typeof value === "string" || typeof value === "boolean") return null;
  if (typeof value === "number") return Number.isFinite(value) ? null : `${path} is ${value}, not a JSON number`;
  if (typeof value !== "object") return `${path} is a ${typeof value}, not a JSON value`;
  if (seen.has(value)) return `${path} refers back to itself (a cycle)`;
  seen.add(value);
  try {
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const p = jsonProblem(value[i], `${path}[${i}]`, seen);
        if (p) return p;
      }
      return null;
    }
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      return `${path} is a ${value.constructor?.name ?? "class instance"}, not a plain JSON object`;
    }
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined) continue; // dropped by JSON, as JSON.stringify does
      const p = jsonProblem(v, `${path}.${k}`, seen);
      if (p) return p;
    }
    return null;
  } finally {
    seen.delete(value);
  }
}

/** JSON text with object keys sorted, so equal values hash equally. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      return Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)));
    }
    return v;
  });
}

export function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
