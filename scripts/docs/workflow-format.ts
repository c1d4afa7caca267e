/**
 * docs/workflow-format.md's reference part, made from the published JSON Schema (itself made from
 * the zod schema), so the page says what validation checks and cannot drift from it.
 */
import { workflowJsonSchema } from "../../src/definition/json-schema.js";

type Schema = {
  type?: string;
  enum?: unknown[];
  anyOf?: Schema[];
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
  description?: string;
  default?: unknown;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minItems?: number;
  minLength?: number;
};

// Integers the schema bounds only by JavaScript's safe range: not worth saying.
const SAFE_MAX = Number.MAX_SAFE_INTEGER;

export function workflowFormatReference(): string {
  const root = workflowJsonSchema() as Schema;
  const props = root.properties ?? {};
  const node = props.nodes?.items ?? {};
  const out: string[] = [];
  out.push("## Workflow fields", "", fieldTable(root), "");
  out.push("## `defaults`", "", props.defaults?.description ?? "", "", fieldTable(props.defaults ?? {}), "");
  out.push("## Node fields", "", "Each element of `nodes`.", "", fieldTable(node), "");
  const next = node.properties?.next_on_success?.anyOf?.find((s) => s.items?.properties);
  if (next?.items) {
    out.push("## Cases of `next_on_success`", "", next.items.description ?? "", "", fieldTable(next.items), "");
  }
  for (const name of ["compensation", "concurrency"]) {
    const sub = node.properties?.[name];
    if (sub?.properties) out.push(`## \`${name}\``, "", sub.description ?? "", "", fieldTable(sub), "");
  }
  const trigger = props.triggers?.items;
  if (trigger?.properties) {
    out.push(
      "## `triggers`",
      "",
      `Each element of \`triggers\`. ${trigger.description ?? ""}`,
      "",
      fieldTable(trigger),
      "",
    );
  }
  return out.join("\n");
}

function fieldTable(schema: Schema): string {
  const required = new Set(schema.required ?? []);
  const rows = Object.entries(schema.properties ?? {}).map(([name, field]) =>
    [`\`${name}\``, typeText(field), required.has(name) ? "yes" : "", defaultText(field), cell(field.description)].join(
      " | ",
    ),
  );
  return ["| field | type | required | default | meaning |", "| --- | --- | --- | --- | --- |", ...rows]
    .map((r) => (r.startsWith("|") ? r : `| ${r} |`))
    .join("\n");
}

function typeText(s: Schema): string {
  if (s.anyOf) return s.anyOf.map(typeText).join(" or ");
  if (s.enum) return s.enum.map((v) => `\`${JSON.stringify(v)}\``).join(", ");
  const limits: string[] = [];
  if (s.pattern) limits.push(`\`${s.pattern.replace(/\|/g, "\\|")}\``);
  if (s.minimum !== undefined) limits.push(`>= ${s.minimum}`);
  if (s.exclusiveMinimum !== undefined) limits.push(`> ${s.exclusiveMinimum}`);
  if (s.maximum !== undefined && s.maximum !== SAFE_MAX) limits.push(`<= ${s.maximum}`);
  if (s.minItems !== undefined) limits.push(`at least ${s.minItems}`);
  if (s.minLength !== undefined) limits.push(`not empty`);
  let base = s.type ?? "any";
  if (s.type === "array") {
    const of = s.items?.properties ? "object" : typeText(s.items ?? {});
    base = `list of ${of}`;
  }
  return limits.length ? `${base} (${limits.join(", ")})` : base;
}

function defaultText(s: Schema): string {
  return s.default === undefined ? "" : `\`${JSON.stringify(s.default)}\``;
}

function cell(text: string | undefined): string {
  // `<id>` would be read as an HTML tag.
  return (text ?? "").replace(/\|/g, "\\|").replace(/</g, "&lt;").replace(/\n/g, " ");
}
