/**
 * Secrets (DESIGN §12, §13.1): values given to the engine (`secrets`, `SKEIN_SECRET_<NAME>`) that
 * payloads name as `{{ secrets.NAME }}` and nothing stores.
 *
 * How a value reaches a request and nothing else:
 * 1. A template that reads `secrets.NAME` by name sees a marker for it, never the value: text
 *    with a random nonce made for this one resolution (`markers`), so no data (input, events,
 *    outputs, even a marker leaked by an earlier run) can hold it. Other templates do not see
 *    `secrets` at all, and it is not enumerable (`$string($)`, `**`, `$sift` never show it).
 * 2. `seal` turns every marker of the resolved payload into the text `"[secret NAME]"`, which is
 *    what is stored, and refuses the payload when (a) anything of a marker is left (a template
 *    that cut or transformed a secret) or (b) a string that carries a secret also holds
 *    `"[secret NAME]"` text the templates did not put there (from data): then every placeholder
 *    under a secret-reading template's path (`CompiledNode.secretUses`) is a read site, exactly.
 * 3. At dispatch, `fill` puts the values in for `"[secret NAME]"` at those paths only.
 * 4. `redact` replaces any occurrence of a value (and of its percent-, form-, JSON- and
 *    base64-encoded forms) in an attempt's output, error and progress by `"[secret NAME]"`.
 * 5. A secret may name its destinations (`hosts`) and users (`workflows`): `allowsHost`,
 *    `allowsWorkflow`, checked at registration and at dispatch (engine/attempts/secret-owners.ts).
 */
import { randomBytes } from "node:crypto";
import type { Json } from "../../core/types.js";
import type { SecretUse } from "../../definition/expressions.js";
import { ValidationError } from "../../errors.js";

export type { SecretUse };

/** A secret's name: what `SKEIN_SECRET_<NAME>` and `secrets.NAME` spell. */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** Shorter values would make redaction an oracle (and match ordinary text). */
export const MIN_SECRET_LENGTH = 8;

/** A secret as the engine option gives it: its value, or the value with where it may go and who may use it. */
export type SecretOption = string | { value: string; hosts?: string[]; workflows?: string[] };

interface Secret {
  value: string;
  /** Host names or `*.example.com` patterns the value may be sent to; null: any. */
  hosts: string[] | null;
  /** Workflow id patterns (`*` wildcard) whose nodes may read it; null: any. */
  workflows: string[] | null;
  /** The forms redaction removes: the value and its encodings, longest first. */
  forms: string[];
}

/** The text a secret's value is stored as. */
export function placeholder(name: string): string {
  return `[secret ${name}]`;
}

/** What to tell the user when a payload names a secret the process does not have. */
export function notConfigured(name: string): string {
  return `secret ${name} is not configured: set SKEIN_SECRET_${name} or the secrets option`;
}

/** True when `host` (a URL's hostname) is one of `patterns`: a name, or `*.example.com` (any subdomain). */
export function hostMatches(host: string, patterns: readonly string[]): boolean {
  const h = host.toLowerCase().replace(/\.$/, "");
  return patterns.some((p) => {
    const q = p.toLowerCase();
    return q.startsWith("*.") ? h.endsWith(q.slice(1)) && h.length > q.length - 1 : h === q;
  });
}

/** True when `id` matches one of `patterns` (`*` matches any run of characters, as token scopes). */
export function idMatches(id: string, patterns: readonly string[]): boolean {
  return patterns.some((p) => {
    const re = new RegExp(`^${p.split("*").map(escapeRegExp).join(".*")}$`);
    return re.test(id);
  });
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The encoded forms of a value that redaction also removes (DESIGN §13.1). */
function encodedForms(value: string): string[] {
  const forms = new Set<string>([value]);
  forms.add(encodeURIComponent(value));
  forms.add(new URLSearchParams({ v: value }).toString().slice(2));
  try {
    // A URL path's encoding (what a URL object's pathname holds), which differs from encodeURIComponent.
    forms.add(new URL(`http://h/${value}`).pathname.slice(1));
  } catch {
    // Not a path: the other forms still hold.
  }
  forms.add(JSON.stringify(value).slice(1, -1));
  const base64 = Buffer.from(value).toString("base64");
  forms.add(base64);
  forms.add(base64.replace(/=+$/, ""));
  forms.add(Buffer.from(value).toString("base64url"));
  return [...forms].filter((f) => f.length > 0).sort((a, b) => b.length - a.length);
}

function carriedIn(text: string, secret: Secret): boolean {
  return secret.forms.some((form) => text.includes(form));
}

export class Secrets {
  private readonly secrets = new Map<string, Secret>();
  /** Every form of every value, longest first, so a value that contains another is replaced whole. */
  private ordered: [string, string][] = [];

  /**
   * @throws ValidationError for a name that is not `[A-Za-z_][A-Za-z0-9_]*`, a value under 8
   *   characters, or hosts/workflows that are not lists of non-empty strings
   */
  constructor(values: Record<string, SecretOption> = {}) {
    const problems = Object.entries(values).flatMap(([name, option]) => secretProblems(name, option));
    if (problems.length > 0) throw new ValidationError("The secrets are invalid", problems);
    for (const [name, option] of Object.entries(values)) {
      const o = typeof option === "string" ? { value: option } : option;
      this.set(name, { value: o.value, hosts: o.hosts ?? null, workflows: o.workflows ?? null });
    }
  }

  /** Adds a value to redact (and to fill, under `name`): a provider's api_key. */
  add(name: string, value: string): void {
    if (value === "") return;
    this.set(name, { value, hosts: null, workflows: null });
  }

  private set(name: string, s: Omit<Secret, "forms">): void {
    this.secrets.set(name, { ...s, forms: encodedForms(s.value) });
    this.ordered = [...this.secrets]
      .flatMap(([n, secret]) => secret.forms.map((f): [string, string] => [n, f]))
      .sort((a, b) => b[1].length - a[1].length);
  }

  has(name: string): boolean {
    return this.secrets.has(name);
  }

  /** The host patterns a secret may be sent to, or null (anywhere). */
  hostsOf(name: string): readonly string[] | null {
    return this.secrets.get(name)?.hosts ?? null;
  }

  /** Null when workflow `id` may read the secret, else why not (a sentence naming the rule and the option). */
  workflowRefusal(name: string, id: string): string | null {
    const patterns = this.secrets.get(name)?.workflows ?? null;
    if (patterns === null || idMatches(id, patterns)) return null;
    return `secret ${name} may be used only by workflows ${patterns.join(", ")} (its workflows), not by ${id}; add the workflow to the secret's workflows (the secrets option or SKEIN_SECRET_${name}_WORKFLOWS)`;
  }

  /**
   * Null when every secret whose value `texts` carry may go to `host`, else why not. A value is
   * carried in any of its encoded forms too (a JSON body escapes it, a query percent-encodes it).
   */
  hostRefusal(texts: readonly string[], host: string): string | null {
    for (const [name, secret] of this.secrets) {
      if (secret.hosts === null || hostMatches(host, secret.hosts)) continue;
      if (texts.some((t) => carriedIn(t, secret))) {
        return `secret ${name} may be sent only to ${secret.hosts.join(", ")} (its hosts), not to ${host}; add the host to the secret's hosts (the secrets option or SKEIN_SECRET_${name}_HOSTS)`;
      }
    }
    return null;
  }

  /** True when `text` holds the value of any secret (in any of its encoded forms). */
  carries(text: string): boolean {
    for (const secret of this.secrets.values()) if (carriedIn(text, secret)) return true;
    return false;
  }

  /**
   * `text`, an excerpt cut short, without an end that is the start of a secret's value (or of an
   * encoded form): redaction finds whole values only, so a value cut at the excerpt's end would
   * otherwise leave its start in the message.
   */
  withoutCutSecret(text: string): string {
    let cut = 0;
    for (const [, form] of this.ordered) {
      for (let n = Math.min(form.length - 1, text.length); n > cut; n -= 1) {
        if (text.endsWith(form.slice(0, n))) {
          cut = n;
          break;
        }
      }
    }
    return text.slice(0, text.length - cut);
  }

  /** A copy of `value` with every occurrence of a secret's value (or an encoded form), inside strings (deep), replaced by `"[secret NAME]"`. */
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
    for (const [name, form] of this.ordered) if (out.includes(form)) out = out.split(form).join(placeholder(name));
    return out;
  }

  /**
   * The payload with the secrets' values put in for `"[secret NAME]"` at the paths `uses` names
   * (deep under each), for those names only. Null payloads and missing paths are left alone.
   * `seal` made sure every such placeholder there is a template's read of the secret.
   * @throws Error naming the first secret this process does not have (`notConfigured`)
   */
  fill(payload: Json, uses: readonly SecretUse[]): Json {
    if (uses.length === 0) return payload;
    const missing = uses.flatMap((u) => u.names).find((n) => !this.secrets.has(n));
    if (missing !== undefined) throw new Error(notConfigured(missing));
    let root = structuredClone(payload);
    for (const use of uses) {
      const pattern = placeholderPattern(use.names);
      const values = (v: Json): Json =>
        mapStrings(v, (s) => s.replace(pattern, (_m, n: string) => this.secrets.get(n)?.value as string)) as Json;
      root = updateAt(root, use.at, values);
    }
    return root;
  }
}

function secretProblems(name: string, option: SecretOption): { path: string; message: string }[] {
  const path = `secrets.${name}`;
  if (!SECRET_NAME.test(name)) {
    return [
      {
        path,
        message: `a secret's name is letters, digits and '_' (not first a digit): rename SKEIN_SECRET_${name} or the secrets option's key`,
      },
    ];
  }
  const o = typeof option === "string" ? { value: option } : option;
  if (o === null || typeof o !== "object" || typeof o.value !== "string" || o.value === "") {
    return [{ path, message: "must be a non-empty string (the secret's value), or { value, hosts?, workflows? }" }];
  }
  const problems: { path: string; message: string }[] = [];
  if ([...o.value].length < MIN_SECRET_LENGTH) {
    problems.push({
      path,
      message: `secret ${name} is ${[...o.value].length} characters, under the minimum of ${MIN_SECRET_LENGTH} (a short value makes redaction an oracle): use a longer value for SKEIN_SECRET_${name} or the secrets option`,
    });
  }
  for (const key of ["hosts", "workflows"] as const) {
    const list = (o as Record<string, unknown>)[key];
    if (list === undefined) continue;
    if (!Array.isArray(list) || list.length === 0 || list.some((x) => typeof x !== "string" || x.trim() === "")) {
      problems.push({
        path: `${path}.${key}`,
        message: `must be a non-empty list of ${key === "hosts" ? 'host names or "*.example.com" patterns' : 'workflow ids or patterns ("team-a-*")'}`,
      });
    }
  }
  return problems;
}

/**
 * The secrets of a process's environment (DESIGN §12): `SKEIN_SECRET_<NAME>=value` gives NAME,
 * `SKEIN_SECRET_<NAME>_HOSTS` and `SKEIN_SECRET_<NAME>_WORKFLOWS` (comma-separated) its hosts and
 * workflows when `SKEIN_SECRET_<NAME>` is set too. `skein serve`, `engine`, `run`, `resume` and
 * `worker` read them. Empty variables are left out.
 */
export function secretsFromEnv(env: NodeJS.ProcessEnv = process.env): Record<string, SecretOption> {
  const prefix = "SKEIN_SECRET_";
  const values = new Map<string, string>();
  for (const [key, value] of Object.entries(env)) {
    if (key.startsWith(prefix) && key.length > prefix.length && value) values.set(key.slice(prefix.length), value);
  }
  const listOf = (name: string, suffix: string): string[] | undefined => {
    const text = values.get(`${name}${suffix}`);
    return text === undefined
      ? undefined
      : text
          .split(",")
          .map((s) => s.trim())
          .filter((s) => s !== "");
  };
  const isOption = (key: string) =>
    ["_HOSTS", "_WORKFLOWS"].some((suffix) => key.endsWith(suffix) && values.has(key.slice(0, -suffix.length)));
  const out: Record<string, SecretOption> = {};
  for (const [name, value] of values) {
    if (isOption(name)) continue;
    const hosts = listOf(name, "_HOSTS");
    const workflows = listOf(name, "_WORKFLOWS");
    out[name] =
      hosts === undefined && workflows === undefined
        ? value
        : { value, ...(hosts ? { hosts } : {}), ...(workflows ? { workflows } : {}) };
  }
  return out;
}

/** What one resolution's templates see as `secrets`: a marker per name, never a value, and the nonce that makes them. */
export interface Markers {
  secrets: Record<string, string>;
  nonce: string;
}

// Private-use characters: JSON.stringify keeps them as they are, so `$string(secrets.X)` still
// holds a whole marker; no text the engine is given is expected to hold them around a nonce.
const OPEN = "\uE000";
const CLOSE = "\uE001";

/** Markers for `names`, with a nonce made now: text from before this resolution cannot hold them. */
export function markers(names: readonly string[]): Markers {
  const nonce = randomBytes(16).toString("hex");
  const secrets: Record<string, string> = {};
  for (const name of names) secrets[name] = `${OPEN}skein-secret:${nonce}:${name}${CLOSE}`;
  return { secrets, nonce };
}

/**
 * A resolved payload with each marker replaced by `"[secret NAME]"` (what is stored), or why it
 * cannot be (see the module doc): a marker cut or transformed, or placeholder text from data
 * beside a secret.
 */
export function seal(value: unknown, m: Markers, uses: readonly SecretUse[]): { value: unknown } | { problem: string } {
  const marker = new RegExp(`${OPEN}skein-secret:${m.nonce}:([A-Za-z0-9_]+)${CLOSE}`, "g");
  let leftover = false;
  const sealed = mapStrings(value, (s) => {
    if (!s.includes(m.nonce)) return s;
    const out = s.replace(marker, (_x, n: string) => placeholder(n));
    if (out.includes(m.nonce)) leftover = true;
    return out;
  });
  if (leftover) {
    return {
      problem:
        "a template changed a secret's value (cut, cased, encoded or compared it): a secret may only be placed as it is, alone or inside text; transform it in the service or agent that receives it",
    };
  }
  for (const use of uses) {
    const pattern = placeholderPattern(use.names);
    let reads = 0;
    let placed = 0;
    for (const s of stringsAt(value, use.at)) reads += s.match(marker)?.length ?? 0;
    for (const s of stringsAt(sealed, use.at)) placed += s.match(pattern)?.length ?? 0;
    if (placed > reads) {
      return {
        problem: `payload.${use.at.join(".")} holds the text "[secret ${use.names.join(']" or "[secret ')}]" that no template put there (it came from input, an event or a node's output) beside a read of that secret; it cannot be sent there, since it would be taken for the secret: keep such data out of the field that carries the secret`,
      };
    }
  }
  return { value: sealed };
}

function placeholderPattern(names: readonly string[]): RegExp {
  return new RegExp(`\\[secret (${names.map(escapeRegExp).join("|")})\\]`, "g");
}

/** The strings (values and keys, deep) under path `at` of `root`. */
function stringsAt(root: unknown, at: readonly (string | number)[]): string[] {
  let node = root;
  for (const step of at) {
    if (node === null || typeof node !== "object" || !Object.hasOwn(node, step)) return [];
    node = (node as Record<string | number, unknown>)[step];
  }
  const out: string[] = [];
  mapStrings(node, (s) => {
    out.push(s);
    return s;
  });
  return out;
}

/** A copy of a JSON value with `fn` applied to every string in it, object keys included. */
function mapStrings(value: unknown, fn: (s: string) => string): unknown {
  if (typeof value === "string") return fn(value);
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, fn));
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[fn(k)] = mapStrings(v, fn);
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

/** Text (an expression's error) with this resolution's markers as placeholders and anything else of them removed. */
export function unmark(text: string, m: Markers): string {
  if (!text.includes(m.nonce)) return text;
  const marker = new RegExp(`${OPEN}skein-secret:${m.nonce}:([A-Za-z0-9_]+)${CLOSE}`, "g");
  return text
    .replace(marker, (_x, n: string) => placeholder(n))
    .split(m.nonce)
    .join("[secret]");
}
