/**
 * Secrets (DESIGN §12): values given to the engine (`secrets`, `SKEIN_SECRET_<NAME>`) that
 * payloads name as `{{ secrets.NAME }}` and nothing stores.
 *
 * How a value reaches a request and nothing else:
 * 1. Templates resolve with `secrets.NAME` bound to a per-process marker, never the value
 *    (`markers`), and every marker in the result becomes the text `"[secret NAME]"` before the
 *    payload is stored (`placeholders`): events, the API, the page, logs see only that.
 * 2. The compiled node knows statically which payload paths' templates read which names
 *    (`CompiledNode.secretUses`). At dispatch, `fill` puts the value in for `"[secret NAME]"`
 *    only there and only for those names, so a run input holding the text "[secret X]" (copied
 *    by a template into another field) never pulls a secret in.
 * 3. `redact` replaces any occurrence of a value in an attempt's output, error and progress by
 *    `"[secret NAME]"` before it leaves the attempt runner (a service that echoes a header back).
 */
import { randomBytes } from "node:crypto";
import type { Json } from "../core/types.js";
import type { SecretUse } from "../definition/expressions.js";
import { ValidationError } from "../errors.js";

export type { SecretUse };

/** A secret's name: what `SKEIN_SECRET_<NAME>` and `secrets.NAME` spell. */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** The text a secret's value is stored as. */
export function placeholder(name: string): string {
  return `[secret ${name}]`;
}

/** What to tell the user when a payload names a secret the process does not have. */
export function notConfigured(name: string): string {
  return `secret ${name} is not configured: set SKEIN_SECRET_${name} or the secrets option`;
}

/** One random token per process: markers cannot be guessed (or written into an input) in advance. */
const PROCESS_TOKEN = randomBytes(16).toString("hex");
const MARKER = new RegExp(`\\u001fskein-secret:${PROCESS_TOKEN}:([A-Za-z0-9_]+)\\u001f`, "g");

export class Secrets {
  private readonly values = new Map<string, string>();
  /** Longest first, so a value that contains another is replaced whole. */
  private ordered: [string, string][] = [];

  /** @throws ValidationError for a name that is not `[A-Za-z_][A-Za-z0-9_]*` or an empty value */
  constructor(values: Record<string, string> = {}) {
    const problems = Object.entries(values).flatMap(([name, value]) => {
      if (!SECRET_NAME.test(name)) {
        return [
          {
            path: `secrets.${name}`,
            message: `a secret's name is letters, digits and '_' (not first a digit): rename SKEIN_SECRET_${name} or the secrets option's key`,
          },
        ];
      }
      if (typeof value !== "string" || value === "") {
        return [{ path: `secrets.${name}`, message: "must be a non-empty string (the secret's value)" }];
      }
      return [];
    });
    if (problems.length > 0) throw new ValidationError("The secrets are invalid", problems);
    for (const [name, value] of Object.entries(values)) this.add(name, value);
  }

  /** Adds a value to redact (and to fill, under `name`): a provider's api_key. */
  add(name: string, value: string): void {
    if (value === "") return;
    this.values.set(name, value);
    this.ordered = [...this.values].sort((a, b) => b[1].length - a[1].length);
  }

  has(name: string): boolean {
    return this.values.has(name);
  }

  /** A copy of `value` with every occurrence of a secret's value, inside strings (deep), replaced by `"[secret NAME]"`. */
  redact<T>(value: T): T {
    if (this.ordered.length === 0) return value;
    return this.redactValue(value, 0) as T;
  }

  private redactValue(value: unknown, depth: number): unknown {
    if (typeof value === "string") return this.redactString(value);
    // Deep enough for any JSON the engine accepts; beyond, the value is refused as output anyway.
    if (depth > 200 || value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) return value.map((v) => this.redactValue(v, depth + 1));
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) return value;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[this.redactString(k)] = this.redactValue(v, depth + 1);
    return out;
  }

  private redactString(text: string): string {
    let out = text;
    for (const [name, secret] of this.ordered)
      if (out.includes(secret)) out = out.split(secret).join(placeholder(name));
    return out;
  }

  /**
   * The payload with the secrets' values put in for `"[secret NAME]"` at the paths `uses` names
   * (deep under each), for those names only. Null payloads and missing paths are left alone.
   * @throws Error naming the first secret this process does not have (`notConfigured`)
   */
  fill(payload: Json, uses: readonly SecretUse[]): Json {
    if (uses.length === 0) return payload;
    const missing = uses.flatMap((u) => u.names).find((n) => !this.values.has(n));
    if (missing !== undefined) throw new Error(notConfigured(missing));
    let root = structuredClone(payload);
    for (const use of uses) {
      const replace = (v: Json): Json => this.fillValue(v, use.names);
      root = updateAt(root, use.at, replace);
    }
    return root;
  }

  private fillValue(value: Json, names: readonly string[]): Json {
    if (typeof value === "string") {
      let out = value;
      for (const name of names) out = out.split(placeholder(name)).join(this.values.get(name) as string);
      return out;
    }
    if (Array.isArray(value)) return value.map((v) => this.fillValue(v, names));
    if (value !== null && typeof value === "object") {
      const out: Record<string, Json> = {};
      for (const [k, v] of Object.entries(value)) out[k] = this.fillValue(v, names);
      return out;
    }
    return value;
  }
}

/**
 * The secrets of a process's environment: `SKEIN_SECRET_<NAME>=value` gives NAME (DESIGN §12);
 * `skein serve`, `engine`, `run`, `resume` and `worker` read them. Empty variables are left out.
 */
export function secretsFromEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (key.startsWith("SKEIN_SECRET_") && key.length > "SKEIN_SECRET_".length && value) {
      out[key.slice("SKEIN_SECRET_".length)] = value;
    }
  }
  return out;
}

/** What templates see as `secrets`: a marker per name, never a value. */
export function markers(names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) out[name] = `\u001fskein-secret:${PROCESS_TOKEN}:${name}\u001f`;
  return out;
}

/** A resolved payload with each marker replaced by `"[secret NAME]"`: what is stored. */
export function placeholders(value: unknown): unknown {
  if (typeof value === "string")
    return value.includes("\u001f") ? value.replace(MARKER, (_m, n) => placeholder(n)) : value;
  if (Array.isArray(value)) return value.map(placeholders);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[placeholders(k) as string] = placeholders(v);
    return out;
  }
  return value;
}

function updateAt(root: Json, at: readonly (string | number)[], fn: (v: Json) => Json): Json {
  if (at.length === 0) return fn(root);
  const [head, ...rest] = at;
  if (Array.isArray(root) && typeof head === "number" && head < root.length) {
    root[head] = updateAt(root[head] as Json, rest, fn);
  } else if (
    root !== null &&
    typeof root === "object" &&
    !Array.isArray(root) &&
    typeof head === "string" &&
    Object.hasOwn(root, head)
  ) {
    root[head] = updateAt(root[head] as Json, rest, fn);
  }
  return root;
}
