/** JSON checks at the engine's boundaries: handler outputs, run inputs, canonical hashing. */
import { createHash } from "node:crypto";
import { withArticle } from "../errors.js";
import { MAX_JSON_DEPTH } from "../json-text.js";

/**
 * Where `value` stops being plain JSON (a function, a class instance, NaN, a cycle...) or nests
 * deeper than MAX_JSON_DEPTH (the HTTP API's and the CLI's limit: what reads such a value next,
 * JSON.stringify among them, would overflow the stack), or null when it is JSON. Iterative: a
 * value a million levels deep is reported, not a stack overflow.
 */
export function jsonProblem(value: unknown, path = "output"): string | null {
  // An object or array being looked at, its members one at a time; paths are built only for a problem.
  type Frame = {
    value: object;
    keys: string[] | null;
    next: number;
    depth: number;
    parent: Frame | null;
    key: string | number;
  };
  const pathOf = (frame: Frame | null, key: string | number | null): string => {
    const keys: (string | number)[] = key === null ? [] : [key];
    for (let f = frame; f?.parent; f = f.parent) keys.push(f.key);
    return keys.reduceRight<string>((p, k) => (typeof k === "number" ? `${p}[${k}]` : `${p}.${k}`), path);
  };
  /** The objects from the root to the member looked at: one met again among them is a cycle. */
  const onPath = new Set<object>();
  let top: Frame | null = null;
  let v: unknown = value;
  let key: string | number | null = null;
  for (;;) {
    if (typeof v === "number" && !Number.isFinite(v)) return `${pathOf(top, key)} is ${v}, not a JSON number`;
    if (v !== null && typeof v === "object") {
      if (onPath.has(v)) return `${pathOf(top, key)} refers back to itself (a cycle)`;
      const depth: number = (top?.depth ?? 0) + 1;
      if (depth > MAX_JSON_DEPTH) {
        return `${pathOf(top, key)} is level ${depth} of nested objects and arrays, past the limit of ${MAX_JSON_DEPTH}; flatten the data, or pass a part that deep as a JSON string`;
      }
      const array = Array.isArray(v);
      if (!array) {
        const proto = Object.getPrototypeOf(v);
        if (proto !== Object.prototype && proto !== null) {
          return `${pathOf(top, key)} is ${withArticle(v.constructor?.name ?? "class instance")}, not a plain JSON object`;
        }
      }
      onPath.add(v);
      top = { value: v, keys: array ? null : Object.keys(v), next: 0, depth, parent: top, key: key ?? "" };
    } else if (v !== null && typeof v !== "string" && typeof v !== "boolean" && typeof v !== "number") {
      return `${pathOf(top, key)} is ${withArticle(typeof v)}, not a JSON value`;
    }
    // The next member to look at: of the innermost object with members left.
    for (;;) {
      if (top === null) return null;
      const at: number = top.next++;
      if (top.keys === null) {
        const list = top.value as unknown[];
        if (at < list.length) {
          key = at;
          v = list[at];
          break;
        }
      } else if (at < top.keys.length) {
        key = top.keys[at] as string;
        v = (top.value as Record<string, unknown>)[key];
        if (v === undefined) continue; // dropped by JSON, as JSON.stringify does
        break;
      }
      onPath.delete(top.value);
      top = top.parent;
    }
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
