/**
 * docs/http-api.md's reference part: every route of the API, grouped by tag, with who may call it
 * and its parameters, and what each error status means. Read from the OpenAPI document the
 * server itself serves (built from the registered routes), on an in-memory engine.
 */
import { createEngine } from "../../src/engine/engine.js";
import { createServer } from "../../src/http/server.js";

interface Operation {
  tags?: string[];
  summary?: string;
  description?: string;
  security?: unknown[];
  parameters?: { name: string; in: string; description?: string }[];
  requestBody?: { content?: Record<string, { schema?: { properties?: Record<string, unknown>; $ref?: string } }> };
  responses?: Record<string, { description?: string }>;
}

interface Document {
  tags: { name: string; description: string }[];
  paths: Record<string, Record<string, Operation>>;
}

export async function httpReference(): Promise<string> {
  const doc = await openApi();
  const out: string[] = ["## Routes", ""];
  out.push(
    "Generated from `GET /v1/openapi.json`, which has the exact schemas. `{name}` is a path parameter;",
    "*query* and *body* list the fields a route takes.",
    "",
  );
  for (const tag of doc.tags) {
    const rows: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        if (!(op.tags ?? []).includes(tag.name)) continue;
        rows.push(`| \`${method.toUpperCase()} ${path}\` | ${cell(op.summary)} | ${who(op)} | ${fields(op)} |`);
      }
    }
    if (rows.length === 0) continue;
    out.push(`### ${tag.name}`, "", `${cell(tag.description)}.`, "");
    out.push("| route | what it does | who | takes |", "| --- | --- | --- | --- |", ...rows, "");
  }
  out.push("## Error statuses", "", 'Every error answers `{ "error": { "code", "message", "details" } }`.', "");
  out.push("| status | meaning |", "| --- | --- |");
  const statuses = new Map<string, string>();
  for (const ops of Object.values(doc.paths)) {
    for (const op of Object.values(ops)) {
      for (const [status, answer] of Object.entries(op.responses ?? {})) {
        if (/^[45]\d\d$/.test(status) && answer.description) statuses.set(status, answer.description);
      }
    }
  }
  for (const status of [...statuses.keys()].sort()) out.push(`| ${status} | ${cell(statuses.get(status))} |`);
  out.push("");
  return out.join("\n");
}

/** The OpenAPI document the server serves (on an in-memory engine, without the admin page). */
export async function openApi(): Promise<Document> {
  const engine = await createEngine({ database: "sqlite::memory:", agents: {} });
  try {
    const app = await createServer({ engine, ui: false });
    try {
      const answer = await app.inject({ method: "GET", url: "/v1/openapi.json" });
      return answer.json() as Document;
    } finally {
      await app.close();
    }
  } finally {
    await engine.close();
  }
}

/** Who may call: "no token", or the roles the route's description names. */
function who(op: Operation): string {
  if ((op.security ?? []).length === 0) return "no token";
  const roles = /Roles: ([^.]*)\./.exec(op.description ?? "");
  return roles?.[1] ?? "a token";
}

function fields(op: Operation): string {
  const parts: string[] = [];
  const query = (op.parameters ?? []).filter((p) => p.in === "query").map((p) => `\`${p.name}\``);
  if (query.length) parts.push(`query: ${query.join(", ")}`);
  const body = op.requestBody?.content?.["application/json"]?.schema;
  if (body?.properties)
    parts.push(
      `body: ${Object.keys(body.properties)
        .map((k) => `\`${k}\``)
        .join(", ")}`,
    );
  else if (body) parts.push(`body: ${body.$ref ? `a \`${body.$ref.split("/").pop()}\`` : "JSON"}`);
  return parts.join("; ");
}

/** Text for a table cell: pipes escaped, and `<` outside code spans (where it would start a tag). */
function cell(text: string | undefined): string {
  return (text ?? "")
    .replace(/\n/g, " ")
    .replace(/\.$/, "")
    .split("`")
    .map((part, i) => (i % 2 === 1 ? part : part.replace(/</g, "&lt;")).replace(/\|/g, "\\|"))
    .join("`");
}
