/**
 * @internal Converts zod issues into Problems with Skein paths and plain messages. zod's own
 * messages ("Invalid input: expected record, received number") speak zod, not workflow.
 * Parse with `reportInput: true` so messages can say what was received.
 */
import type { z } from "zod";
import type { Problem } from "../errors.js";
import { formatPath } from "./path.js";
import { nearest } from "./suggest.js";

type Issue = z.core.$ZodIssue;

/**
 * @param schema the schema that was parsed: an unknown field then suggests the nearest field
 *   the schema knows at that place (`unknown field "timout" (did you mean "timeout"?)`).
 */
export function issuesToProblems(issues: readonly Issue[], base = "", schema?: z.ZodType): Problem[] {
  return problemsOf(issues, base, [], schema);
}

function problemsOf(issues: readonly Issue[], base: string, prefix: PropertyKey[], schema?: z.ZodType): Problem[] {
  return issues.flatMap((issue) => issueToProblems(issue, base, prefix, schema));
}

function issueToProblems(issue: Issue, base: string, prefix: PropertyKey[], schema?: z.ZodType): Problem[] {
  const path = formatPath(issue.path, base);
  switch (issue.code) {
    case "unrecognized_keys": {
      const known = schema ? knownKeysAt(schema, [...prefix, ...issue.path]) : [];
      return issue.keys.map((key) => {
        const near = nearest(key, known);
        return { path, message: `unknown field "${key}"${near === undefined ? "" : ` (did you mean "${near}"?)`}` };
      });
    }
    case "invalid_union":
      return unionProblems(issue, path, [...prefix, ...issue.path], schema);
    default:
      return [{ path, message: issueMessage(issue) }];
  }
}

/** The field names of every object the schema allows at `path` (unions give all their branches'). */
function knownKeysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  type Def = {
    type: string;
    shape?: Record<string, z.ZodType>;
    element?: z.ZodType;
    options?: z.ZodType[];
    innerType?: z.ZodType;
    valueType?: z.ZodType;
  };
  const defOf = (s: z.ZodType) => (s as unknown as { _zod: { def: Def } })._zod.def;
  let at: z.ZodType[] = [schema];
  const unwrap = (list: z.ZodType[]): z.ZodType[] =>
    list.flatMap((s) => {
      const def = defOf(s);
      if (def.innerType) return unwrap([def.innerType]);
      if (def.type === "union" && def.options) return unwrap(def.options);
      return [s];
    });
  for (const key of path) {
    at = unwrap(at).flatMap((s) => {
      const def = defOf(s);
      if (def.type === "object" && typeof key === "string" && def.shape?.[key]) return [def.shape[key]];
      if (def.type === "array" && typeof key === "number" && def.element) return [def.element];
      if (def.type === "record" && def.valueType) return [def.valueType];
      return [];
    });
  }
  return [...new Set(unwrap(at).flatMap((s) => Object.keys(defOf(s).shape ?? {})))];
}

/**
 * zod reports a failed union with the issues of every branch. The branch that got furthest into
 * the value is the one the author meant (a case object with a bad `when` is a case, not a
 * string); when no branch stands out, the union's own message lists the accepted shapes.
 */
function unionProblems(
  issue: Extract<Issue, { code: "invalid_union" }>,
  path: string,
  keys: PropertyKey[],
  schema?: z.ZodType,
): Problem[] {
  const scored = issue.errors
    .map((branch) => ({ branch, score: progress(branch) }))
    .sort((a, b) => b.score - a.score || a.branch.length - b.branch.length);
  const [best, second] = scored;
  const tied =
    !best || (second !== undefined && second.score === best.score && second.branch.length === best.branch.length);
  if (tied || !best || best.score === 0) {
    if (issue.input === undefined) return [{ path, message: "is required" }];
    // A list reaching here fits no list form: it mixes them (ids and cases) or holds neither.
    const got = Array.isArray(issue.input) ? "a list mixing these forms" : describe(issue.input);
    return [{ path, message: `${issue.message}, got ${got}` }];
  }
  return problemsOf(best.branch, path, keys, schema);
}

function progress(branch: readonly Issue[]): number {
  let score = 0;
  for (const i of branch) {
    // A type mismatch at the union itself means the branch did not apply at all.
    const depth = i.path.length + (i.code === "invalid_type" ? 0 : 0.5);
    score = Math.max(score, depth);
  }
  return score;
}

function issueMessage(issue: Issue): string {
  switch (issue.code) {
    case "invalid_type":
      if (issue.input === undefined) return "is required";
      return `expected ${article(issue.expected)}, got ${describe(issue.input)}`;
    case "too_small":
      return tooSmall(issue);
    case "too_big":
      return issue.origin === "number" || issue.origin === "int"
        ? `must be ${issue.inclusive ? "<=" : "<"} ${issue.maximum}, got ${describe(issue.input)}`
        : `must have at most ${issue.maximum} ${unit(issue.origin)}`;
    case "invalid_value":
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}, got ${describe(issue.input)}`;
    case "invalid_format":
      // Our regexes carry their own plain message (see schema.ts).
      return `${issue.message}, got ${describe(issue.input)}`;
    case "invalid_key":
      return `invalid key: ${issuesToProblems(issue.issues)
        .map((p) => p.message)
        .join("; ")}`;
    case "invalid_element":
      return issuesToProblems(issue.issues)
        .map((p) => p.message)
        .join("; ");
    default:
      return issue.message;
  }
}

function tooSmall(issue: Extract<Issue, { code: "too_small" }>): string {
  if (issue.origin === "number" || issue.origin === "int") {
    return `must be ${issue.inclusive ? ">=" : ">"} ${issue.minimum}, got ${describe(issue.input)}`;
  }
  if (Number(issue.minimum) === 1) return "must not be empty";
  return `must have at least ${issue.minimum} ${unit(issue.origin)}`;
}

function unit(origin: string): string {
  return origin === "string" ? "characters" : "items";
}

function article(expected: string): string {
  const names: Record<string, string> = {
    int: "an integer",
    number: "a number",
    string: "a string",
    boolean: "a boolean",
    array: "a list",
    object: "an object",
    record: "an object",
  };
  return names[expected] ?? expected;
}

/** What the author wrote, briefly: `"some"`, `1.5`, `a list`, `an object`. */
function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  switch (typeof value) {
    case "string": {
      const text = value.length > 40 ? `${value.slice(0, 40)}...` : value;
      return JSON.stringify(text);
    }
    case "number":
    case "boolean":
      return String(value);
    case "object":
      return "an object";
    case "undefined":
      return "nothing";
    default:
      return typeof value;
  }
}
