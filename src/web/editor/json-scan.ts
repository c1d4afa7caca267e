/**
 * Positions in JSON text, without a syntax tree: where the value at a problem's path
 * (`nodes[1].depends_on[0]`) is, and what the cursor is in (a key or a value, at which path),
 * tolerant of half-typed text. Small on purpose: definitions are a few kilobytes, so scanning
 * from the start on each request costs nothing worth a cache.
 */

export type PathPart = string | number;

/** A value's range in the text, and its key's when it is an object member. */
export interface Located {
  from: number;
  to: number;
  key?: { from: number; to: number };
  /** false: the path goes deeper than the text (a missing member); this is its deepest container. */
  complete: boolean;
}

/** `nodes[1].depends_on[0]` as ["nodes", 1, "depends_on", 0]; "" and "(root)" as []. */
export function parsePath(path: string): PathPart[] {
  const parts: PathPart[] = [];
  if (path === "(root)") return parts;
  for (const m of path.matchAll(/\[(\d+)\]|([^.[\]]+)/g)) {
    parts.push(m[1] !== undefined ? Number(m[1]) : (m[2] as string));
  }
  return parts;
}

/** Where the value at `path` is in `text` (valid JSON), or the deepest container on the way to it. */
export function locate(text: string, path: readonly PathPart[]): Located {
  const from = skipSpace(text, 0);
  let found: Located = { from, to: valueEnd(text, from), complete: true };
  for (const part of path) {
    const next = member(text, found.from, part);
    if (!next) return { ...found, complete: false };
    found = next;
  }
  return found;
}

function member(text: string, at: number, part: PathPart): Located | null {
  const open = text[at];
  if (open === "{") {
    let i = skipSpace(text, at + 1);
    while (text[i] === '"') {
      const keyTo = stringEnd(text, i);
      const key = decodeString(text.slice(i, keyTo));
      let j = skipSpace(text, keyTo);
      if (text[j] !== ":") return null;
      j = skipSpace(text, j + 1);
      const to = valueEnd(text, j);
      if (key === String(part)) return { from: j, to, key: { from: i, to: keyTo }, complete: true };
      i = skipSpace(text, to);
      if (text[i] !== ",") return null;
      i = skipSpace(text, i + 1);
    }
    return null;
  }
  if (open === "[" && typeof part === "number") {
    let i = skipSpace(text, at + 1);
    for (let n = 0; i < text.length && text[i] !== "]"; n++) {
      const to = valueEnd(text, i);
      if (n === part) return { from: i, to, complete: true };
      i = skipSpace(text, to);
      if (text[i] !== ",") return null;
      i = skipSpace(text, i + 1);
    }
  }
  return null;
}

/** What the cursor is in: a key of the object at `path`, or the value at `path`. */
export interface CursorContext {
  role: "key" | "value";
  /** For a key: the object's path. For a value: the value's own path. */
  path: PathPart[];
  /** The string the cursor is inside, quotes included (`closed` false: no closing quote yet). */
  string?: { from: number; to: number; closed: boolean };
  /** Keys the object already has before the cursor (role "key"). */
  siblings: string[];
}

type Frame =
  | {
      kind: "object";
      part: PathPart | null;
      key: string | null;
      phase: "key" | "colon" | "value" | "after";
      keys: string[];
    }
  | { kind: "array"; part: PathPart | null; index: number; phase: "value" | "after" };

/** Scans `text` up to `pos`, tolerating anything unfinished. null: the cursor is in no key or value. */
export function contextAt(text: string, pos: number): CursorContext | null {
  const stack: Frame[] = [];
  let rootDone = false;
  const top = (): Frame | undefined => stack[stack.length - 1];
  const pathOf = () => stack.slice(1).map((f) => f.part as PathPart);
  // The path part a value starting now gets, or undefined when no value is expected here.
  const valuePart = (): PathPart | null | undefined => {
    const t = top();
    if (!t) return rootDone ? undefined : null;
    if (t.kind === "object") return t.phase === "value" ? t.key : undefined;
    return t.phase === "value" ? t.index : undefined;
  };
  const valueDone = () => {
    const t = top();
    if (!t) rootDone = true;
    else t.phase = "after";
  };
  let i = 0;
  while (true) {
    i = skipSpace(text, i);
    if (i >= pos) break;
    const c = text[i] as string;
    if (c === '"') {
      const end = stringEnd(text, i);
      const closed = end > i + 1 && text[end - 1] === '"';
      const to = end;
      const t = top();
      if (to > pos || (!closed && to === pos)) {
        // The cursor is inside this string.
        const string = { from: i, to, closed };
        if (t?.kind === "object" && t.phase === "key") return { role: "key", path: pathOf(), string, siblings: t.keys };
        const part = valuePart();
        if (part === undefined) return null;
        return { role: "value", path: part === null ? [] : [...pathOf(), part], string, siblings: [] };
      }
      if (t?.kind === "object" && t.phase === "key") {
        t.key = decodeString(text.slice(i, to));
        t.keys.push(t.key);
        t.phase = "colon";
      } else valueDone();
      i = to;
    } else if (c === "{" || c === "[") {
      const part = valuePart();
      if (part === undefined) return null;
      stack.push(
        c === "{"
          ? { kind: "object", part, key: null, phase: "key", keys: [] }
          : { kind: "array", part, index: 0, phase: "value" },
      );
      i++;
    } else if (c === "}" || c === "]") {
      stack.pop();
      valueDone();
      i++;
    } else if (c === ":") {
      const t = top();
      if (t?.kind === "object") t.phase = "value";
      i++;
    } else if (c === ",") {
      const t = top();
      if (t?.kind === "object") {
        t.phase = "key";
        t.key = null;
      } else if (t) {
        t.index++;
        t.phase = "value";
      }
      i++;
    } else {
      const end = valueEnd(text, i);
      if (end >= pos) {
        const part = valuePart();
        if (part === undefined) return null;
        return { role: "value", path: part === null ? [] : [...pathOf(), part], siblings: [] };
      }
      valueDone();
      i = Math.max(end, i + 1);
    }
  }
  const t = top();
  if (t?.kind === "object" && t.phase === "key") return { role: "key", path: pathOf(), siblings: t.keys };
  const part = valuePart();
  if (part === undefined) return null;
  return { role: "value", path: part === null ? [] : [...pathOf(), part], siblings: [] };
}

/** A JSON string literal's value; a half-typed one's text so far. */
export function decodeString(literal: string): string {
  try {
    return JSON.parse(literal) as string;
  } catch {
    return literal.replace(/^"/, "").replace(/"$/, "");
  }
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && " \t\n\r".includes(text[i] as string)) i++;
  return i;
}

/** The end (after the closing quote) of the string starting at `i`; at the line's end if unclosed. */
function stringEnd(text: string, i: number): number {
  i++;
  while (i < text.length && text[i] !== '"' && text[i] !== "\n") i += text[i] === "\\" ? 2 : 1;
  return text[i] === '"' ? i + 1 : Math.min(i, text.length);
}

function valueEnd(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return stringEnd(text, i);
  if (c === "{" || c === "[") {
    let depth = 0;
    while (i < text.length) {
      const ch = text[i];
      if (ch === '"') {
        i = stringEnd(text, i);
        continue;
      }
      if (ch === "{" || ch === "[") depth++;
      else if (ch === "}" || ch === "]") {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
    return i;
  }
  while (i < text.length && !',}]:" \t\n\r'.includes(text[i] as string)) i++;
  return i;
}
