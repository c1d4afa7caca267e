/**
 * Loads an agents module: a `.js`, `.mjs` or `.ts` file whose default export maps agent_type to
 * a handler, e.g. `export default { summarize: async (task) => ({ summary: "..." }) }` (or, without
 * a default export, whose exported functions are the handlers, named by agent_type). A `.ts`
 * file loads without a build step through tsx. Every problem is a CliError (exit 2) that names
 * the file.
 */
import { existsSync } from "node:fs";
import { extname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { AgentHandler } from "../index.js";
import { CliError } from "./output.js";

const TYPESCRIPT = new Set([".ts", ".mts", ".cts"]);
const JAVASCRIPT = new Set([".js", ".mjs", ".cjs"]);

/** The handlers of the module at `file` (relative to the working directory). @throws CliError */
export async function loadAgents(file: string): Promise<Record<string, AgentHandler>> {
  const path = resolve(file);
  const ext = extname(path);
  if (!TYPESCRIPT.has(ext) && !JAVASCRIPT.has(ext)) {
    throw new CliError(`agents module ${file}: expected a .js, .mjs or .ts file`);
  }
  if (!existsSync(path)) throw new CliError(`agents module ${file} does not exist`);
  const url = pathToFileURL(path).href;
  let module: unknown;
  try {
    if (TYPESCRIPT.has(ext)) {
      const { tsImport } = await import("tsx/esm/api");
      module = await tsImport(url, import.meta.url);
    } else {
      module = await import(url);
    }
  } catch (e) {
    const reason = e instanceof Error ? e.message : String(e);
    // What CommonJS cannot hold (see esModuleOf): top-level await, import.meta, and a require() of
    // an ES module only package such as skein (no "require" entry point).
    const toEsm = 'name it .mts, or add "type": "module" to its package.json';
    const hint = /"cjs" output format/.test(reason)
      ? `; outside an ESM package a .ts file is compiled as CommonJS: ${toEsm}`
      : /No "exports" main defined/.test(reason)
        ? `; CommonJS cannot import an ES module only package such as skein: ${TYPESCRIPT.has(ext) ? `outside an ESM package a .ts file is compiled as CommonJS: ${toEsm}` : "compile the module to ES modules"}`
        : "";
    throw new CliError(`agents module ${file} failed to load: ${reason}${hint}`);
  }
  return handlersOf(esModuleOf(module), file);
}

/**
 * An ES module compiled to CommonJS keeps its exports on `module.exports` with `__esModule` set:
 * a `.js` file tsc wrote with `"module": "commonjs"`, or a `.ts` file outside an ESM package (no
 * package.json, or one without `"type": "module"`), which tsx compiles so. Importing it gives
 * `{ default: { __esModule, default: handlers, ...named } }`: unwrapped here as a bundler would,
 * so the file loads whatever package it sits in.
 */
function esModuleOf(module: unknown): unknown {
  const exports = (module as { default?: unknown }).default;
  if (exports !== null && typeof exports === "object" && (exports as { __esModule?: unknown }).__esModule === true) {
    return exports;
  }
  return module;
}

/**
 * The handlers of a loaded module: its default export, else (a module without one) its named
 * exports that are functions, e.g. `export const summarize = async (task) => ...`.
 */
function handlersOf(module: unknown, file: string): Record<string, AgentHandler> {
  const exports = module as Record<string, unknown>;
  const usage = "export default { <agent_type>: async (task) => output, ... }";
  const named = Object.entries(exports).filter(([name, value]) => name !== "default" && typeof value === "function");
  const agents = exports.default === undefined && named.length > 0 ? Object.fromEntries(named) : exports.default;
  if (agents === undefined) {
    throw new CliError(`agents module ${file} has no default export nor exported functions; write ${usage}`);
  }
  if (typeof agents !== "object" || agents === null || Array.isArray(agents)) {
    throw new CliError(`agents module ${file}: the default export must be an object; write ${usage}`);
  }
  const entries = Object.entries(agents);
  if (entries.length === 0) throw new CliError(`agents module ${file} exports no handlers; write ${usage}`);
  const notFunctions = entries.filter(([, handler]) => typeof handler !== "function").map(([type]) => type);
  if (notFunctions.length > 0) {
    throw new CliError(
      `agents module ${file}: the handlers of ${notFunctions.map((t) => `"${t}"`).join(", ")} are not functions; ${usage}`,
    );
  }
  return Object.fromEntries(entries) as Record<string, AgentHandler>;
}

type NodeShape = { node_id?: string; agent_type?: string; compensation?: { agent_type?: string } };

/**
 * Refuses to run a workflow whose agent types (compensation included) have no handler here:
 * their visits would wait forever, since this process's engine is the only one on the file.
 * Built-in types (aggregator, human_review) need none. An invalid definition is left to the
 * caller's validation. @throws CliError naming the types, their nodes and what to do
 */
export async function assertAgentsCover(
  definition: unknown,
  agents: Record<string, AgentHandler>,
  modulePath: string | undefined,
  what: string,
): Promise<void> {
  const { validateWorkflow } = await import("../index.js");
  const result = validateWorkflow(definition, { knownAgentTypes: Object.keys(agents) });
  if (!result.ok) return;
  const nodes = ((definition as { nodes?: unknown }).nodes ?? []) as NodeShape[];
  const missing = new Map<string, string[]>();
  for (const w of result.warnings) {
    const m = /^nodes\[(\d+)\]\.(agent_type|compensation\.agent_type)$/.exec(w.path);
    const node = m ? nodes[Number(m[1])] : undefined;
    const type = m?.[2] === "agent_type" ? node?.agent_type : node?.compensation?.agent_type;
    if (node?.node_id === undefined || type === undefined) continue;
    missing.set(type, [...(missing.get(type) ?? []), node.node_id]);
  }
  if (missing.size === 0) return;
  const list = [...missing].map(([type, ids]) => `"${type}" (node${ids.length > 1 ? "s" : ""} ${ids.join(", ")})`);
  throw new CliError(
    modulePath === undefined
      ? `${what} needs agents for ${list.join(", ")}: pass --agents <module> whose default export handles them`
      : `agents module ${modulePath} has no handler for ${list.join(", ")}, which ${what} needs: add them to its default export`,
  );
}
