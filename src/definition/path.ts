/** Problem paths in the style `nodes[4].depends_on[1]` (the style users see in every message). */

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** Appends one key to a path: numbers as `[n]`, identifiers as `.key`, other keys quoted. */
export function joinPath(base: string, key: PropertyKey): string {
  if (typeof key === "number") return `${base}[${key}]`;
  const name = String(key);
  if (IDENTIFIER.test(name)) return base === "" ? name : `${base}.${name}`;
  return `${base}[${JSON.stringify(name)}]`;
}

/** Formats a zod-style path (`["nodes", 4, "depends_on", 1]`). */
export function formatPath(keys: readonly PropertyKey[], base = ""): string {
  let path = base;
  for (const key of keys) path = joinPath(path, key);
  return path;
}
