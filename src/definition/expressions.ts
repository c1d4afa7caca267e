/**
 * JSONata templates (`"{{ expr }}"`) and `when` conditions (DESIGN §5).
 *
 * Everything is parsed once, when a workflow version is compiled; evaluation is async (JSONata
 * is), which is why the engine runs it outside transactions (DESIGN §4).
 *
 * Decisions where DESIGN is silent:
 * - A template is the text between `{{` and the next `}}`; there is no escape for a literal
 *   `{{`, and an expression that itself contains `}}` must put a space between the braces.
 * - A whole-string template whose expression yields nothing (JSONata `undefined`, e.g. a
 *   missing field) resolves to `null`; inside interpolation it becomes the empty string. In an
 *   object an `undefined` value drops the key, as `JSON.stringify` would.
 * - Results must be JSON: a function or a non-finite number is an evaluation error.
 * - Evaluation is bounded, so a poison expression fails its visit, never the engine (DESIGN §13).
 *   An expression made only of paths, operators, conditions and constructors is a series of
 *   cheap steps, and runs here: JSONata's time and depth guardrails are checked at every step,
 *   and so is the size of every value a step makes (the sandbox's limits).
 *   Any other (a function call, a regular expression, a range, a lambda) runs in the sandbox
 *   (sandbox.ts): a worker thread stopped at the time limit, with a bounded heap and size checks,
 *   since one built-in call (`$pad`, `$join`, a backtracking regex) is beyond JSONata's own checks.
 * - `secrets.NAME` (DESIGN §12) is read only in node payloads that allow it, and only by name:
 *   the paths of the strings that read each name are kept (`secretUses`) so that the engine puts
 *   values in there only (engine/attempts/secrets.ts); `secrets` read any other way is refused. Only an
 *   expression that reads a secret by name sees `secrets`, holding only the names it reads, as a
 *   property no enumeration shows (`$string($)`, `$keys`, `**`, `$sift`, `$each`); `$lookup`,
 *   which could reach it by a computed name, is refused in such an expression, and
 *   `$lookup(x, "secrets")` everywhere.
 * - `$eval` is refused at validation (it runs data as code), and so are the names `__proto__`,
 *   `constructor` and `prototype` as path steps (they read JavaScript internals, not data).
 */
import jsonata from "jsonata";
import { type Problem, withArticle } from "../errors.js";
import { MAX_JSON_DEPTH } from "../json-text.js";
import { joinPath } from "./path.js";
import { EXPRESSION_LIMITS, evaluateInSandbox } from "./sandbox.js";
import { RESERVED_NAMES } from "./schema.js";

/** What an expression sees: `input`, `nodes.<id>`, `run`, and `output` (in `when`) / `self` (in compensation). */
export interface ExpressionContext {
  input: unknown;
  /** In payloads: a marker per secret name the payload reads (engine/attempts/secrets.ts), never a value. */
  secrets?: Record<string, string>;
  nodes: Record<string, { output: unknown; status: string; error: unknown } | null>;
  run: { run_id: string; trace_id: string };
  output?: unknown;
  self?: unknown;
  /** In a map item's run: the item and its index in the list. */
  item?: unknown;
  index?: number;
  /** In an agent tool's payload: the model's arguments of the call. */
  args?: unknown;
  /** In a trigger's input (definition/triggers.ts): the published event that starts the run. */
  event?: unknown;
}

/** Where a template reads `nodes.<id>`, for the "reads a node that is not an ancestor" warning. */
export interface NodeRead {
  path: string;
  node_id: string;
}

/** Where a payload holds secrets: a path under the payload, and the names its templates read there. */
export interface SecretUse {
  at: (string | number)[];
  names: string[];
}

/** A payload with its templates parsed. */
export interface CompiledPayload {
  /** Returns a new JSON value: the payload with every template replaced by its value. */
  resolve(ctx: ExpressionContext): Promise<unknown>;
  /** Node ids the templates read through `nodes.<id>` (deduplicated, first-read order). */
  readonly readsNodes: string[];
  /** Each read with the path of the string holding it. */
  readonly reads: NodeRead[];
  /** The strings whose templates read `secrets.NAME`, with the names (empty when none). */
  readonly secretUses: SecretUse[];
  /** Every secret name read, deduplicated. */
  readonly secretNames: string[];
}

/** Where secrets may be read: absent, nowhere, with this reason (the default names where they may be). */
export interface PayloadOptions {
  /** Null: secrets may be read. A string: why not (the problem's message). */
  secretsRefused?: string | null;
}

/** Why a template may not read secrets where it is, unless the caller allows them. */
export const SECRETS_ONLY_IN_PAYLOADS =
  "secrets may be read only in a node's payload (an http or llm node's, or an agent's that declares them with defineAgent({ secrets }))";
const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** A parsed `when` condition. */
export interface CompiledWhen {
  /** True when the result is truthy by JSONata's `$boolean` rules; a missing result is false. */
  test(ctx: ExpressionContext): Promise<boolean>;
  readonly readsNodes: string[];
}

/** Thrown (as a rejection) when an expression fails at evaluation time. */
export class ExpressionError extends Error {
  override readonly name = "ExpressionError";
  constructor(
    readonly expression: string,
    readonly path: string,
    cause: unknown,
  ) {
    super(`expression "${expression}" at ${path} failed: ${describeJsonataError(cause)}`, {
      cause,
    });
  }
}

// JSONata evaluates in microtasks, so a runaway expression starves the event loop until the
// time guard (ms) fires; real templates take microseconds. `stack` bounds evaluation depth.
const GUARDRAILS = { timeout: EXPRESSION_LIMITS.timeoutMs, stack: EXPRESSION_LIMITS.stack };
/** AST node types whose cost is bounded by the data: evaluated in this thread. */
const IN_THREAD = new Set([
  "path",
  "binary",
  "unary",
  "name",
  "string",
  "number",
  "value",
  "wildcard",
  "descendant",
  "parent",
  "condition",
  "block",
  "bind",
  "variable",
  "sort",
  "filter",
]);
const TEMPLATE = /\{\{([\s\S]*?)\}\}/g;

type Part = string | { expr: Expression };
type Node =
  | { kind: "literal"; value: unknown }
  | { kind: "whole"; expr: Expression }
  | { kind: "text"; parts: Part[] }
  | { kind: "array"; items: Node[] }
  | { kind: "object"; entries: [string, Node][] };

interface Expression {
  source: string;
  path: string;
  compiled: jsonata.Expression;
  /** The secret names it reads (`secrets.NAME`). */
  secrets: string[];
  /** True when it must run in the sandbox (see the module doc). */
  sandboxed: boolean;
  /** A plain path of names (`item`, `nodes.plan.output`): read without JSONata where it may be (`readPath`). */
  names: string[] | null;
}

/**
 * Parses every template in a payload (nested objects and arrays included).
 * `template` is null when the payload holds no template, so the engine can skip evaluation.
 * @example compilePayload({ topic: "{{ input.topic }}" }, "nodes[0].payload")
 */
export function compilePayload(
  payload: unknown,
  path: string,
  options: PayloadOptions = {},
): { template: CompiledPayload | null; problems: Problem[] } {
  const c: Compiling = {
    problems: [],
    reads: [],
    secretUses: [],
    secretsRefused: options.secretsRefused === undefined ? SECRETS_ONLY_IN_PAYLOADS : options.secretsRefused,
  };
  const root = compileValue(payload, path, [], c);
  if (c.problems.length > 0 || root.kind === "literal") return { template: null, problems: c.problems };
  return {
    template: {
      resolve: (ctx) => resolveNode(root, ctx),
      readsNodes: unique(c.reads.map((r) => r.node_id)),
      reads: c.reads,
      secretUses: c.secretUses,
      secretNames: unique(c.secretUses.flatMap((u) => u.names)),
    },
    problems: c.problems,
  };
}

/** What compiling a payload collects. */
interface Compiling {
  problems: Problem[];
  reads: NodeRead[];
  secretUses: SecretUse[];
  secretsRefused: string | null;
}

/** Parses a `when` condition of a `next_on_success` case. */
export function compileWhen(expr: string, path: string): { when: CompiledWhen | null; problems: Problem[] } {
  const problems: Problem[] = [];
  const compiled = parse(expr, path, problems, SECRETS_ONLY_IN_PAYLOADS);
  if (!compiled) return { when: null, problems };
  return {
    when: {
      test: async (ctx) => toBoolean(await evaluate(compiled, ctx)),
      readsNodes: unique(nodeReads(compiled.compiled.ast())),
    },
    problems,
  };
}

/** True when `text` is one template and nothing else (`"{{ expr }}"`): its value may be any JSON type. */
export function isWholeTemplate(text: string): boolean {
  const matches = [...text.matchAll(TEMPLATE)];
  return matches.length === 1 && matches[0]?.[0] === text.trim();
}

/** `at` is the path under the payload (for secretUses), `path` the same in words with its prefix. */
function compileValue(value: unknown, path: string, at: (string | number)[], c: Compiling): Node {
  if (typeof value === "string") return compileString(value, path, at, c);
  if (Array.isArray(value)) {
    const items = value.map((v, i) => compileValue(v, joinPath(path, i), [...at, i], c));
    return items.every((n) => n.kind === "literal") ? { kind: "literal", value } : { kind: "array", items };
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).map(
      ([k, v]) => [k, compileValue(v, joinPath(path, k), [...at, k], c)] as [string, Node],
    );
    return entries.every(([, n]) => n.kind === "literal") ? { kind: "literal", value } : { kind: "object", entries };
  }
  return { kind: "literal", value };
}

function compileString(text: string, path: string, at: (string | number)[], c: Compiling): Node {
  const { problems, reads } = c;
  const matches = [...text.matchAll(TEMPLATE)];
  if (matches.length === 0) return { kind: "literal", value: text };
  const secretNames: string[] = [];
  const compileOne = (source: string): Expression | null => {
    const expr = parse(source, path, problems, c.secretsRefused);
    if (expr) for (const id of nodeReads(expr.compiled.ast())) reads.push({ path, node_id: id });
    if (expr) secretNames.push(...expr.secrets);
    return expr;
  };
  const node = compileTemplates(text, matches, compileOne);
  if (secretNames.length > 0) c.secretUses.push({ at, names: unique(secretNames) });
  return node;
}

function compileTemplates(
  text: string,
  matches: RegExpExecArray[],
  compileOne: (source: string) => Expression | null,
): Node {
  const trimmed = text.trim();
  const first = matches[0];
  if (matches.length === 1 && first && first[0] === trimmed) {
    const expr = compileOne(first[1] ?? "");
    return expr ? { kind: "whole", expr } : { kind: "literal", value: text };
  }
  const parts: Part[] = [];
  let last = 0;
  for (const m of matches) {
    parts.push(text.slice(last, m.index));
    const expr = compileOne(m[1] ?? "");
    if (expr) parts.push({ expr });
    last = m.index + m[0].length;
  }
  parts.push(text.slice(last));
  return { kind: "text", parts };
}

function parse(source: string, path: string, problems: Problem[], secretsRefused: string | null): Expression | null {
  const trimmed = source.trim();
  if (trimmed === "") {
    problems.push({ path, message: "empty expression" });
    return null;
  }
  // JSONata's parser recurses once per level: a deep expression would overflow the stack.
  const depth = bracketDepth(trimmed);
  if (depth > MAX_EXPRESSION_NESTING) {
    problems.push({
      path,
      message: `the expression nests ${depth} levels of brackets, past the limit of ${MAX_EXPRESSION_NESTING}; split it into smaller templates`,
    });
    return null;
  }
  let compiled: jsonata.Expression;
  try {
    compiled = jsonata(trimmed, GUARDRAILS);
  } catch (err) {
    if (err instanceof RangeError) {
      // A chain of operators or conditions thousands long (no brackets): too deep to parse.
      const message = `the expression (${trimmed.length} characters) chains too many operators or conditions to parse; split it into smaller templates`;
      problems.push({ path, message });
      return null;
    }
    problems.push({ path, message: `cannot parse "${trimmed}": ${describeJsonataError(err)}` });
    return null;
  }
  const scan = scanAst(compiled.ast());
  for (const name of scan.reserved) {
    problems.push({
      path,
      message: `"${trimmed}" reads "${name}", which is refused: it names JavaScript object internals, not data; rename the field`,
    });
  }
  if (scan.evaluates) {
    problems.push({
      path,
      message: `"${trimmed}" uses $eval, which is not available: it would run data as code`,
    });
  }
  const secrets = secretReads(compiled.ast());
  for (const name of secrets.invalid) {
    problems.push({
      path,
      message: `"${trimmed}" reads secrets.${name}, which is not a secret's name: letters, digits and '_' (not first a digit)`,
    });
  }
  if (secrets.lookup) {
    problems.push({
      path,
      message: `"${trimmed}" uses $lookup beside secrets.${secrets.names[0]}: a computed name could reach other secrets; read other data in a separate template`,
    });
  }
  if (secrets.dynamic) {
    problems.push({
      path,
      message: `"${trimmed}" reads secrets without naming one: write secrets.NAME (the engine must know which secrets go where)`,
    });
  }
  if (secretsRefused !== null) {
    for (const name of secrets.names)
      problems.push({ path, message: `"${trimmed}" reads secrets.${name}: ${secretsRefused}` });
  }
  const refusedSecrets =
    secrets.invalid.length > 0 ||
    secrets.dynamic ||
    secrets.lookup ||
    (secretsRefused !== null && secrets.names.length > 0);
  if (scan.reserved.length > 0 || scan.evaluates || refusedSecrets) return null;
  // In this thread too, no step may make a value past the sandbox's size limits (a path mapped
  // over a path over a path grows with the cube of its data).
  if (!scan.sandboxed) compiled.assign(EXIT_HOOK, checkSize);
  const names = secrets.names.length === 0 ? plainPath(compiled.ast()) : null;
  return { source: trimmed, path, compiled, sandboxed: scan.sandboxed, secrets: secrets.names, names };
}

/** The names of an expression that is a path of names only (no filter, no `[]`, no variable), else null. */
function plainPath(ast: unknown): string[] | null {
  const { type, steps, ...rest } = ast as { type?: unknown; steps?: unknown };
  if (type !== "path" || !Array.isArray(steps) || Object.keys(rest).length > 0) return null;
  const names: string[] = [];
  for (const step of steps as Record<string, unknown>[]) {
    const { type: t, value, position, ...more } = step;
    if (t !== "name" || typeof value !== "string" || Object.keys(more).length > 0) return null;
    void position;
    names.push(value);
  }
  return names;
}

/**
 * A plain path's value read straight from the data, as JSONata would give it, while every value
 * it goes through is an object (not an array: JSONata maps a path over one); `NOT_PLAIN` where
 * it is not, and JSONata evaluates it. A missing name gives undefined, as in JSONata. Nine in
 * ten templates are such paths, and JSONata's evaluation of one costs more than a step's write.
 */
function readPath(names: readonly string[], data: unknown): unknown {
  let value = data;
  for (const name of names) {
    if (value === undefined) return undefined;
    if (value === null || typeof value !== "object" || Array.isArray(value)) return NOT_PLAIN;
    value = Object.hasOwn(value, name) ? (value as Record<string, unknown>)[name] : undefined;
  }
  return value;
}

const NOT_PLAIN = Symbol("not a plain path read");

const EXIT_HOOK = Symbol.for("jsonata.__evaluate_exit") as unknown as string;

/** JSONata's exit hook: every value a step makes is checked (the sandbox's limits). */
function checkSize(_expr: unknown, _input: unknown, _env: unknown, result: unknown): void {
  if (typeof result === "string" && result.length > EXPRESSION_LIMITS.maxChars) {
    throw new Error(`a string of ${result.length} characters is over the limit of ${EXPRESSION_LIMITS.maxChars}`);
  }
  if (Array.isArray(result) && result.length > EXPRESSION_LIMITS.maxItems) {
    throw new Error(`a list of ${result.length} items is over the limit of ${EXPRESSION_LIMITS.maxItems}`);
  }
}

/** What validation and routing need to know of an expression's AST. */
function scanAst(ast: unknown): { reserved: string[]; evaluates: boolean; sandboxed: boolean } {
  const reserved: string[] = [];
  let evaluates = false;
  let sandboxed = false;
  const seen = new Set<object>();
  const walk = (n: unknown): void => {
    if (n === null || typeof n !== "object" || seen.has(n) || n instanceof RegExp) return;
    seen.add(n);
    const { type, value } = n as { type?: unknown; value?: unknown };
    if (typeof type === "string") {
      if (!IN_THREAD.has(type) || (type === "binary" && value === "..")) sandboxed = true;
      if (type === "name" && typeof value === "string" && RESERVED_NAMES.has(value)) reserved.push(value);
      if (type === "variable" && value === "eval") evaluates = true;
    }
    for (const child of Object.values(n)) walk(child);
  };
  walk(ast);
  return { reserved: [...new Set(reserved)], evaluates, sandboxed };
}

async function resolveNode(node: Node, ctx: ExpressionContext): Promise<unknown> {
  switch (node.kind) {
    case "literal":
      return structuredClone(node.value);
    case "whole":
      return (await evaluate(node.expr, ctx)) ?? null;
    case "text": {
      let out = "";
      for (const part of node.parts) {
        if (typeof part === "string") out += part;
        else out += interpolate(await evaluate(part.expr, ctx));
      }
      return out;
    }
    case "array": {
      const items: unknown[] = [];
      for (const item of node.items) items.push(await resolveNode(item, ctx));
      return items;
    }
    case "object": {
      const out: Record<string, unknown> = {};
      for (const [key, item] of node.entries) {
        const value = await resolveNode(item, ctx);
        if (value !== undefined) out[key] = value;
      }
      return out;
    }
  }
}

/** Evaluates and converts the result to plain JSON (JSONata returns sequences and lambdas). */
async function evaluate(expr: Expression, ctx: ExpressionContext): Promise<unknown> {
  try {
    const { secrets, ...data } = ctx;
    const own = secrets && expr.secrets.length > 0 ? pick(secrets, expr.secrets) : undefined;
    if (expr.sandboxed) return await evaluateInSandbox(expr.source, data, own);
    if (expr.names) {
      const value = readPath(expr.names, data);
      if (value !== NOT_PLAIN) {
        checkSize(null, null, null, value); // the limits JSONata's exit hook checks of every step
        return toJson(value);
      }
    }
    // Not enumerable: only a read by name finds it (see the module doc).
    if (own) Object.defineProperty(data, "secrets", { value: own, enumerable: false });
    return toJson(await expr.compiled.evaluate(data));
  } catch (err) {
    throw new ExpressionError(expr.source, expr.path, err);
  }
}

function pick(values: Record<string, string>, names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) if (Object.hasOwn(values, name)) out[name] = values[name] as string;
  return out;
}

function interpolate(value: unknown): string {
  if (value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function toJson(value: unknown): unknown {
  if (value === undefined || value === null) return value;
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      if (!Number.isFinite(value)) throw new Error(`the result ${value} is not a JSON number`);
      return value;
    case "object": {
      if (Array.isArray(value)) return value.map((v) => toJson(v) ?? null);
      if ("_jsonata_lambda" in value) throw new Error("the result is a function, not a JSON value");
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) {
        const json = toJson(v);
        if (json !== undefined) out[k] = json;
      }
      return out;
    }
    default:
      throw new Error(`the result is ${withArticle(typeof value)}, not a JSON value`);
  }
}

/** JSONata's `$boolean` casting rules, applied to an already-JSON result. */
export function toBoolean(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (Array.isArray(value)) {
    if (value.length === 1) return toBoolean(value[0]);
    return value.some((v) => toBoolean(v));
  }
  switch (typeof value) {
    case "boolean":
      return value;
    case "string":
      return value.length > 0;
    case "number":
      return value !== 0;
    case "object":
      return Object.keys(value).length > 0;
    default:
      return false;
  }
}

/**
 * Node ids read as `nodes.<id>` (also `$.nodes.<id>` and `$$.nodes.<id>`). Dynamic reads
 * (`nodes.*`, `$lookup(nodes, x)`) cannot be known statically and are not reported.
 */
function nodeReads(ast: unknown): string[] {
  const found: string[] = [];
  eachPath(ast, (steps) => {
    const at = rootOffset(steps);
    const next = steps[at + 1];
    if (isName(steps[at], "nodes") && isName(next)) found.push(next.value);
  });
  return found;
}

/**
 * The secrets an expression reads: `secrets.NAME` (also `$.secrets.NAME`, `$$.secrets.NAME`) by
 * name; `dynamic` when it reads `secrets` otherwise (`secrets`, `secrets.*`, `$lookup(secrets, x)`,
 * `$lookup($$, "secrets")`); `lookup` when it reads a secret by name and uses `$lookup` too.
 */
function secretReads(ast: unknown): { names: string[]; invalid: string[]; dynamic: boolean; lookup: boolean } {
  const names: string[] = [];
  const invalid: string[] = [];
  let dynamic = false;
  eachPath(ast, (steps) => {
    const at = rootOffset(steps);
    const head = steps[at];
    if (!isName(head, "secrets")) return;
    const next = steps[at + 1];
    const plain = (s: unknown) => !(s as { stages?: unknown }).stages;
    if (plain(head) && isName(next)) (SECRET_NAME.test(next.value) ? names : invalid).push(next.value);
    else dynamic = true;
  });
  let lookup = false;
  eachNode(ast, (n) => {
    if (n.type === "variable" && n.value === "lookup") lookup = true;
    const args = (n as { arguments?: unknown }).arguments;
    const proc = (n as { procedure?: { value?: unknown } }).procedure;
    if (n.type === "function" && proc?.value === "lookup" && Array.isArray(args)) {
      if (args.some((a) => (a as { type?: unknown; value?: unknown }).type === "string" && a.value === "secrets"))
        dynamic = true;
    }
  });
  return { names: unique(names), invalid: unique(invalid), dynamic, lookup: lookup && names.length > 0 };
}

/** Calls `visit` with the steps of every path expression in a JSONata AST (each node once). */
function eachPath(ast: unknown, visit: (steps: unknown[]) => void): void {
  const seen = new Set<object>();
  const walk = (n: unknown): void => {
    if (n === null || typeof n !== "object" || seen.has(n)) return;
    seen.add(n);
    const steps = (n as { type?: unknown; steps?: unknown }).steps;
    if ((n as { type?: unknown }).type === "path" && Array.isArray(steps)) visit(steps);
    for (const child of Object.values(n)) walk(child);
  };
  walk(ast);
}

/** Calls `visit` with every node of a JSONata AST (each once). */
function eachNode(ast: unknown, visit: (n: { type?: unknown; value?: unknown }) => void): void {
  const seen = new Set<object>();
  const walk = (n: unknown): void => {
    if (n === null || typeof n !== "object" || seen.has(n)) return;
    seen.add(n);
    visit(n as { type?: unknown; value?: unknown });
    for (const child of Object.values(n)) walk(child);
  };
  walk(ast);
}

/** Where a path's names start: after a leading `$` or `$$` (the context and the root, both the ExpressionContext at the top level). */
function rootOffset(steps: unknown[]): number {
  const first = steps[0] as { type?: unknown; value?: unknown } | undefined;
  return first?.type === "variable" && (first.value === "" || first.value === "$") ? 1 : 0;
}

/** A name step (`value` its name), optionally this one. */
function isName(s: unknown, value?: string): s is { value: string } {
  return (
    typeof s === "object" &&
    s !== null &&
    (s as { type?: unknown }).type === "name" &&
    typeof (s as { value?: unknown }).value === "string" &&
    (value === undefined || (s as { value: string }).value === value)
  );
}

/** The most brackets ((, [, {) an expression may nest: the JSON limit, far beyond what a template needs. */
export const MAX_EXPRESSION_NESTING = MAX_JSON_DEPTH;

/** How deep an expression's brackets nest, outside its strings, quoted names and comments. */
function bracketDepth(source: string): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '"' || c === "'" || c === "`") {
      // To the closing quote; a backslash escapes the next character in strings.
      for (i++; i < source.length && source[i] !== c; i++) if (source[i] === "\\" && c !== "`") i++;
    } else if (c === "/" && source[i + 1] === "*") {
      const end = source.indexOf("*/", i + 2);
      i = end === -1 ? source.length : end + 1;
    } else if (c === "(" || c === "[" || c === "{") {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === ")" || c === "]" || c === "}") {
      depth--;
    }
  }
  return deepest;
}

function describeJsonataError(err: unknown): string {
  if (err !== null && typeof err === "object") {
    const e = err as { message?: unknown; code?: unknown; position?: unknown };
    const message = typeof e.message === "string" ? e.message : String(err);
    const code = typeof e.code === "string" ? `${e.code}: ` : "";
    const at = typeof e.position === "number" ? ` (at character ${e.position})` : "";
    return `${code}${message}${at}`;
  }
  return String(err);
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}
