/**
 * What the commands that run an engine (`serve`, `engine`, `run`, `resume`) take from the
 * environment for the built-in model kinds: `SKEIN_LLM_BASE_URL` (and `SKEIN_LLM_API_KEY`) make
 * the `default` provider of `llm` and `agent` nodes (more providers need the library's `llm`
 * option); `SKEIN_MCP_CONFIG` names a JSON file holding the engine's `mcp` option (agent nodes'
 * MCP servers). The environment, not a flag: `resume` and a restarted engine see the same.
 */
import type { LlmOptions } from "../calls/llm/providers.js";
import type { McpOptions } from "../calls/mcp.js";
import { readJsonFile } from "./input.js";

/** What `--help` says of it. */
export const LLM_ENV_HELP =
  'llm and agent nodes: SKEIN_LLM_BASE_URL (e.g. http://127.0.0.1:11434/v1) and SKEIN_LLM_API_KEY make the default provider; SKEIN_MCP_CONFIG names a JSON file of MCP servers ({ "servers": { "<name>": { "command", "args" } or { "url", "headers" } } }).';

/**
 * The `mcp` option from the file SKEIN_MCP_CONFIG names; nothing without it.
 * @throws CliError (exit 2) for a file that cannot be read or is not JSON; createEngine checks its shape
 */
export function mcpFromEnv(env: NodeJS.ProcessEnv = process.env): { mcp: McpOptions } | Record<string, never> {
  const path = env.SKEIN_MCP_CONFIG;
  if (path === undefined || path === "") return {};
  return { mcp: readJsonFile(path, "MCP config (SKEIN_MCP_CONFIG)") as McpOptions };
}

export function llmFromEnv(env: NodeJS.ProcessEnv = process.env): { llm: LlmOptions } | Record<string, never> {
  const base_url = env.SKEIN_LLM_BASE_URL;
  if (base_url === undefined || base_url === "") return {};
  const api_key = env.SKEIN_LLM_API_KEY;
  return { llm: { providers: { default: { base_url, ...(api_key ? { api_key } : {}) } } } };
}
