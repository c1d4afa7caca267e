/**
 * Strict parsing of JSON text from outside (HTTP bodies, CLI flags and files): the value is
 * stored as received or refused (DESIGN §13), never silently changed.
 *
 * Refused, each with the JSON path (or the byte offset) and what to do:
 * - bytes that are not UTF-8 (a decoder would put U+FFFD in their place);
 * - an integer literal (`-?\d+`, no fraction or exponent) outside ±(2^53-1), which JSON.parse
 *   would round; a literal with a fraction or an exponent is a float by its writer's intent and
 *   is rounded as any float reader would, unless it overflows to Infinity (which JSON.stringify
 *   would turn into null): refused;
 * - escaped lone surrogates (`"\ud800"`): not text, and no UTF-8 store can keep them;
 * - a `__proto__` key, or a `prototype` key inside a `constructor` object: the prototype
 *   poisoning that fastify's secure-json-parse refuses, kept here since this parser replaces it;
 * - with `maxDepth`, objects and arrays nested deeper than that: JSON.parse builds them without
 *   recursion, but what reads them next (validation, JSON.stringify) recurses and would overflow
 *   the stack.
 *
 * The full scan costs a pass over the text, so it runs only when a cheap regex test of the
 * text finds something that may need it (a run of 16 digits, a three-digit exponent, a
 * surrogate escape, a suspicious key), as secure-json-parse does for its keys.
 */
import { isUtf8 } from "node:buffer";
import { joinPath } from "./definition/path.js";
import { type Problem, ValidationError } from "./errors.js";

/** Any JSON value (the ground floor's: the definition, the core and the stores all speak it). */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

// From secure-json-parse: a quoted "__proto__" or "constructor" key, escapes included.
const SUSPECT_PROTO =
  /"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"\s*:/;
const SUSPECT_CONSTRUCTOR =
  /"(?:c|\\u0063)(?:o|\\u006[Ff])(?:n|\\u006[Ee])(?:s|\\u0073)(?:t|\\u0074)(?:r|\\u0072)(?:u|\\u0075)(?:c|\\u0063)(?:t|\\u0074)(?:o|\\u006[Ff])(?:r|\\u0072)"\s*:/;
// 2^53 has 16 digits; an overflow to Infinity needs an exponent of 309 or a long mantissa.
const SUSPECT_NUMBER = /\d{16}|[eE][+-]?\d{3}/;
const SUSPECT_SURROGATE = /\\u[dD][89a-fA-F]/;
const INTEGER = /^-?\d+$/;
/** A JSON string token at lastIndex (the unrolled form: linear, no nested quantifiers). */
const STRING = /"[^"\\]*(?:\\.[^"\\]*)*"/y;
const PLAIN_STRING = /"[^"\\]*"/y;
/** A scan stops collecting after this many problems: enough to fix, bounded for hostile input. */
const MAX_PROBLEMS = 20;

/** What the text is, in messages: "The request body", "--input". */
export interface JsonTextOptions {
  /** Names the text in the error's message, e.g. "The request body" or "--input". */
  what: string;
  /** Prefix of every problem's path, e.g. "body"; empty for the document itself. */
  base?: string;
  /** The most levels of objects and arrays (the document itself is level 1); unlimited when absent. */
  maxDepth?: number;
}

/** The nesting the HTTP API allows in a request body (MAX_JSON_DEPTH in http/server.ts), and the CLI in its files and flags. */
export const MAX_JSON_DEPTH = 64;

/**
 * Parses JSON text strictly (see the module doc).
 * @throws ValidationError with every problem found (path and message), the value unused.
 * @example parseJsonText(Buffer.from('{"n": 12345678901234567890}'), { what: "The request body", base: "body" })
 *   // throws: body.n: integer 12345678901234567890 is outside ±(2^53-1) ...
 */
export function parseJsonText(text: string | Buffer, options: JsonTextOptions): unknown {
  const base = options.base ?? "";
  if (typeof text !== "string") {
    if (!isUtf8(text)) {
      const offset = firstInvalidUtf8(text);
      throw new ValidationError(`${options.what} is not UTF-8 text`, [
        {
          path: base,
          message: `byte ${offset} (0x${(text[offset] ?? 0).toString(16).padStart(2, "0")}) is not valid UTF-8; send text encoded as UTF-8`,
        },
      ]);
    }
    text = text.toString("utf8");
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(`${options.what} is not valid JSON`, [
      { path: base, message: syntaxMessage(text, e as Error) },
    ]);
  }
  if (options.maxDepth !== undefined) {
    const path = pathDeeperThan(value, options.maxDepth, base);
    if (path !== null) {
      throw new ValidationError(`${options.what} nests deeper than ${options.maxDepth} levels`, [
        {
          path,
          message: `this value is level ${options.maxDepth + 1} of nested objects and arrays, past the limit of ${options.maxDepth}; flatten the data, or send a part that deep as a JSON string`,
        },
      ]);
    }
  }
  if (
    SUSPECT_NUMBER.test(text) ||
    SUSPECT_SURROGATE.test(text) ||
    SUSPECT_PROTO.test(text) ||
    SUSPECT_CONSTRUCTOR.test(text)
  ) {
    const problems = scan(text, base);
    if (problems.length > 0)
      throw new ValidationError(`${options.what} has values that cannot be kept as sent`, problems);
  }
  return value;
}

/** The path of the first object or array nested deeper than `max` levels, or null (iterative: no stack to overflow). */
function pathDeeperThan(value: unknown, max: number, base: string): string | null {
  type Item = { v: unknown; depth: number; parent: Item | null; key: string | number };
  const stack: Item[] = [{ v: value, depth: 1, parent: null, key: "" }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const v = item.v;
    if (v === null || typeof v !== "object") continue;
    if (item.depth > max) {
      // The path is built only for the one value reported, from its chain of parents.
      const keys: (string | number)[] = [];
      for (let at: Item | null = item; at?.parent; at = at.parent) keys.push(at.key);
      return keys.reverse().reduce<string>((path, key) => joinPath(path, key), base);
    }
    const entries: [string | number, unknown][] = Array.isArray(v) ? v.map((c, i) => [i, c]) : Object.entries(v);
    // Reversed, so the first child is looked at first and the first deep value is reported.
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, child] = entries[i] as [string | number, unknown];
      if (child !== null && typeof child === "object")
        stack.push({ v: child, depth: item.depth + 1, parent: item, key });
    }
  }
  return null;
}

/** JSON.parse's message with the line and column of the failure (Node 20 gives a position only sometimes). */
function syntaxMessage(text: string, e: Error): string {
  // Node 20 quotes the text itself in some messages ("..." is not valid JSON): the position says it better.
  const message = e.message.replace(/, (\.\.\.)?".*" is not valid JSON$/s, "");
  const at = /position (\d+)/.exec(message);
  const position = at ? Number(at[1]) : errorPosition(text);
  return `${message} (${lineColumn(text, position)})`;
}

/**
 * Where JSON.parse fails, for the messages of Node 20 that give no position ("Unexpected token
 * ']', ... is not valid JSON"): the end of the shortest prefix that fails before its own end
 * (a prefix that only runs out of text is a good one).
 */
function errorPosition(text: string): number {
  const failsInside = (length: number) => {
    try {
      JSON.parse(text.slice(0, length));
      return false;
    } catch (e) {
      const message = (e as Error).message;
      const at = /position (\d+)/.exec(message);
      return at ? Number(at[1]) < length : !message.includes("end of JSON input");
    }
  };
  if (!failsInside(text.length)) return text.length;
  let low = 0;
  let high = text.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (failsInside(mid)) high = mid;
    else low = mid + 1;
  }
  return Math.max(0, low - 1);
}

function lineColumn(text: string, position: number): string {
  const before = text.slice(0, position);
  const line = before.split("\n").length;
  const column = position - before.lastIndexOf("\n");
  return `line ${line}, column ${column}`;
}

/** The offset of the first byte that does not belong to a well-formed UTF-8 sequence. */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i] as number;
    let need: number;
    let min: number;
    if (b < 0x80) {
      i++;
      continue;
    } else if (b >= 0xc2 && b <= 0xdf) {
      need = 1;
      min = 0x80;
    } else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      min = 0x800;
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      min = 0x10000;
    } else return i;
    let cp = b & (0x3f >> need);
    for (let k = 1; k <= need; k++) {
      const c = bytes[i + k];
      if (c === undefined || (c & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (c & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return i;
    i += need + 1;
  }
  return bytes.length;
}

const [OPEN_OBJECT, CLOSE_OBJECT, OPEN_ARRAY, CLOSE_ARRAY, COMMA, COLON, QUOTE, MINUS, DIGIT_0, DIGIT_9] = [
  ...'{}[],:"-09',
].map((c) => c.charCodeAt(0)) as [number, number, number, number, number, number, number, number, number, number];

/** Digits, '.', 'e', 'E', '+' and '-': what a number token is made of. */
function isNumberChar(c: number): boolean {
  return (c >= DIGIT_0 && c <= DIGIT_9) || c === 46 || c === 101 || c === 69 || c === 43 || c === MINUS;
}

type Frame = { kind: "object"; key: string | null; expectKey: boolean } | { kind: "array"; index: number };

/** One pass over text JSON.parse accepted: the problems of the module doc, with their paths. */
function scan(text: string, base: string): Problem[] {
  const problems: Problem[] = [];
  const stack: Frame[] = [];
  const pathHere = (): string => {
    let path = base;
    for (const f of stack) path = joinPath(path, f.kind === "array" ? f.index : (f.key ?? ""));
    return path;
  };
  const add = (message: string) => {
    if (problems.length < MAX_PROBLEMS) problems.push({ path: pathHere(), message });
  };
  let i = 0;
  while (i < text.length && problems.length < MAX_PROBLEMS) {
    const ch = text.charCodeAt(i);
    const top = stack[stack.length - 1];
    if (ch === OPEN_OBJECT) {
      stack.push({ kind: "object", key: null, expectKey: true });
      i++;
    } else if (ch === OPEN_ARRAY) {
      stack.push({ kind: "array", index: 0 });
      i++;
    } else if (ch === CLOSE_OBJECT || ch === CLOSE_ARRAY) {
      stack.pop();
      i++;
    } else if (ch === COMMA) {
      if (top?.kind === "array") top.index++;
      else if (top) top.expectKey = true;
      i++;
    } else if (ch === COLON) {
      if (top?.kind === "object") top.expectKey = false;
      i++;
    } else if (ch === QUOTE) {
      // test(), not exec(): no match to allocate per string; most strings have no escape.
      PLAIN_STRING.lastIndex = i;
      const escaped = !PLAIN_STRING.test(text);
      if (escaped) {
        STRING.lastIndex = i;
        STRING.test(text);
      }
      const end = (escaped ? STRING.lastIndex : PLAIN_STRING.lastIndex) - 1;
      const isKey = top?.kind === "object" && top.expectKey;
      if (isKey || escaped) {
        const raw = text.slice(i + 1, end);
        const decoded = escaped ? (JSON.parse(text.slice(i, end + 1)) as string) : raw;
        if (isKey && top?.kind === "object") {
          const parent = stack[stack.length - 2];
          top.key = decoded;
          if (decoded === "__proto__") add('the key "__proto__" is refused (prototype poisoning); rename it');
          else if (decoded === "prototype" && parent?.kind === "object" && parent.key === "constructor")
            add('a "prototype" key inside "constructor" is refused (prototype poisoning); rename it');
        }
        if (escaped && hasLoneSurrogate(decoded)) {
          add(
            "a string holds an escaped lone surrogate (\\ud800-\\udfff without its pair), which is not text; send valid Unicode",
          );
        }
      }
      i = end + 1;
    } else if (ch === MINUS || (ch >= DIGIT_0 && ch <= DIGIT_9)) {
      let end = i + 1;
      while (end < text.length && isNumberChar(text.charCodeAt(end))) end++;
      checkNumber(text.slice(i, end), add);
      i = end;
    } else i++;
  }
  return problems;
}

function checkNumber(token: string, add: (message: string) => void): void {
  const value = Number(token);
  if (INTEGER.test(token)) {
    if (!Number.isSafeInteger(value)) {
      // Past 2^53 neighbouring integers read as the same number: even one that survives is ambiguous.
      const fate =
        BigInt(token) === BigInt(value) ? "where integers are not exact" : `and would be rounded to ${value}`;
      add(`the integer ${token} is outside ±(2^53-1) ${fate}; send it as a string to keep every digit`);
    }
  } else if (!Number.isFinite(value)) {
    add(`the number ${token} is beyond the range of a 64-bit float; send it as a string`);
  }
}

function hasLoneSurrogate(s: string): boolean {
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(k + 1);
      if (next >= 0xdc00 && next <= 0xdfff) k++;
      else return true;
    } else if (c >= 0xdc00 && c <= 0xdfff) return true;
  }
  return false;
}
