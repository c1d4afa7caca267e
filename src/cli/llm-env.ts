/**
 * The llm node's provider for the commands that run an engine (`serve`, `engine`, `run`, `resume`):
 * `SKEIN_LLM_BASE_URL` (and `SKEIN_LLM_API_KEY`) make the `default` provider. More providers
 * need the library's `llm` option.
 */
import type { LlmOptions } from "../calls/llm/providers.js";

/** What `--help` says of it. */
export const LLM_ENV_HELP =
  "llm nodes: SKEIN_LLM_BASE_URL (e.g. http://127.0.0.1:11434/v1) and SKEIN_LLM_API_KEY make the default provider.";

export function llmFromEnv(env: NodeJS.ProcessEnv = process.env): { llm: LlmOptions } | Record<string, never> {
  const base_url = env.SKEIN_LLM_BASE_URL;
  if (base_url === undefined || base_url === "") return {};
  const api_key = env.SKEIN_LLM_API_KEY;
  return { llm: { providers: { default: { base_url, ...(api_key ? { api_key } : {}) } } } };
}
