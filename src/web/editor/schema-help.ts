/**
 * Completion and hover docs from the workflow's JSON Schema (schema/workflow.schema.json,
 * bundled with the page): property names with their descriptions at the cursor's path, enum
 * values and examples (agent_type's built-ins), and a key's description on hover. Tooltips are
 * built from text nodes, never HTML.
 */
import type { Completion, CompletionContext, CompletionResult } from "@codemirror/autocomplete";
import { type EditorView, hoverTooltip } from "@codemirror/view";
import workflowSchema from "../../../schema/workflow.schema.json";
import { contextAt, decodeString, type PathPart } from "./json-scan.js";

/** The parts of JSON Schema the workflow schema uses. */
interface Schema {
  type?: string | string[];
  description?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  examples?: unknown[];
  $ref?: string;
}

const ROOT = workflowSchema as Schema;

/** The schema and every alternative or part of it (anyOf, oneOf, allOf, local $ref). */
function alternatives(schema: Schema, seen = new Set<Schema>()): Schema[] {
  if (seen.has(schema)) return [];
  seen.add(schema);
  const out = [schema];
  if (schema.$ref?.startsWith("#/")) {
    let target: unknown = ROOT;
    for (const step of schema.$ref.slice(2).split("/"))
      target = (target as Record<string, unknown> | undefined)?.[step];
    if (target && typeof target === "object") out.push(...alternatives(target as Schema, seen));
  }
  for (const s of [...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])]) {
    out.push(...alternatives(s, seen));
  }
  return out;
}

/** The schemas that may describe the value at `path`. */
export function schemasAt(path: readonly PathPart[]): Schema[] {
  let current = [ROOT];
  for (const part of path) {
    const next: Schema[] = [];
    for (const s of current.flatMap((c) => alternatives(c))) {
      if (typeof part === "number") {
        if (s.items) next.push(s.items);
      } else {
        const p = s.properties?.[part];
        if (p) next.push(p);
        else if (typeof s.additionalProperties === "object" && !s.properties) next.push(s.additionalProperties);
      }
    }
    current = next;
  }
  return current;
}

/** The description of the value at `path`: its own first, then its alternatives'. */
export function describe(path: readonly PathPart[]): string | undefined {
  for (const s of schemasAt(path).flatMap((c) => alternatives(c))) if (s.description) return s.description;
  return undefined;
}

function propertiesAt(path: readonly PathPart[]): [string, Schema][] {
  const found = new Map<string, Schema>();
  for (const s of schemasAt(path).flatMap((c) => alternatives(c))) {
    for (const [name, p] of Object.entries(s.properties ?? {})) if (!found.has(name)) found.set(name, p);
  }
  return [...found];
}

function valuesAt(path: readonly PathPart[]): unknown[] {
  const values = new Set<unknown>();
  for (const s of schemasAt(path).flatMap((c) => alternatives(c))) {
    for (const v of [...(s.enum ?? []), ...(s.examples ?? []), ...("const" in s ? [s.const] : [])]) values.add(v);
  }
  return [...values];
}

function typeName(schema: Schema): string | undefined {
  const types = new Set<string>();
  for (const s of alternatives(schema)) for (const t of [s.type ?? []].flat()) types.add(t);
  return types.size ? [...types].join(" | ") : undefined;
}

/**
 * Replaces the string the cursor is in (its quotes too) or, outside a string, the typed word,
 * with `insert`; a key gets its `: ` unless one follows already.
 */
function replacing(insert: string, inString: boolean, key: boolean) {
  return (view: EditorView, _completion: Completion, from: number, to: number) => {
    const doc = view.state.doc;
    const start = inString ? from - 1 : from;
    let end = to;
    if (inString && doc.sliceString(end, end + 1) === '"') end++;
    const after = doc.sliceString(end, Math.min(doc.length, end + 40));
    const text = key && !/^\s*:/.test(after) ? `${insert}: ` : insert;
    view.dispatch({
      changes: { from: start, to: end, insert: text },
      selection: { anchor: start + text.length },
      userEvent: "input.complete",
    });
  };
}

/** Completion source: property names where a key goes, enum values and examples where a value goes. */
export function schemaCompletions(context: CompletionContext): CompletionResult | null {
  const text = context.state.doc.toString();
  const at = contextAt(text, context.pos);
  if (!at) return null;
  const inString = at.string !== undefined;
  const word = context.matchBefore(/[\w$-]*/);
  if (!inString && !context.explicit && (!word || word.from === word.to)) return null;
  const from = at.string ? at.string.from + 1 : (word?.from ?? context.pos);
  let options: Completion[];
  if (at.role === "key") {
    options = propertiesAt(at.path)
      .filter(([name]) => !at.siblings.includes(name))
      .map(([name, s]) => ({
        label: name,
        type: "property",
        ...(typeName(s) ? { detail: typeName(s) } : {}),
        ...(s.description ? { info: s.description } : {}),
        apply: replacing(JSON.stringify(name), inString, true),
      }));
  } else {
    options = valuesAt(at.path).map((v) => ({
      label: typeof v === "string" ? v : JSON.stringify(v),
      type: "enum",
      apply: replacing(JSON.stringify(v), inString, false),
    }));
  }
  if (options.length === 0) return null;
  return { from, options, validFor: /^[\w$-]*$/ };
}

/** Hover over a key: its description from the schema. */
export const schemaHover = hoverTooltip((view, pos) => {
  const text = view.state.doc.toString();
  const at = contextAt(text, pos);
  if (at?.role !== "key" || !at.string) return null;
  const name = decodeString(text.slice(at.string.from, at.string.to));
  const description = describe([...at.path, name]);
  if (!description) return null;
  return {
    pos: at.string.from,
    end: at.string.to,
    above: true,
    create() {
      const dom = document.createElement("div");
      dom.className = "cm-schema-doc";
      const title = document.createElement("strong");
      title.textContent = name;
      const body = document.createElement("p");
      body.textContent = description;
      dom.append(title, body);
      return { dom };
    },
  };
});
