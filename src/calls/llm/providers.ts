/** The engine option `llm: { providers }` (DESIGN §12): where each named provider is and how to pay it. */
import { DEFAULT_PROVIDER } from "../../definition/kinds/llm.js";
import { NonRetryableError, type Problem, ValidationError } from "../../errors.js";

/** An OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, LiteLLM, OpenRouter, ...). */
export interface LlmProvider {
  /** Its API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`: `<base_url>/chat/completions` is called. */
  base_url: string;
  /** Sent as `Authorization: Bearer <api_key>`; kept out of stored outputs, errors and logs. */
  api_key?: string;
  /** More headers for every call (e.g. `OpenAI-Organization`). */
  headers?: Record<string, string>;
  /** Prices per 1,000 tokens, for the usage's `cost` (in your currency). */
  cost_per_1k?: { input: number; output: number };
}

export interface LlmOptions {
  /** By name; a payload without `provider` uses `default`. */
  providers: Record<string, LlmProvider>;
}

/** The providers, checked: every problem with its path (createEngine refuses them all at once). */
export function checkProviders(options: LlmOptions | undefined): ReadonlyMap<string, LlmProvider> {
  if (options === undefined) return new Map();
  const problems: Problem[] = [];
  const providers = new Map<string, LlmProvider>();
  if (
    options === null ||
    typeof options !== "object" ||
    typeof options.providers !== "object" ||
    options.providers === null
  ) {
    throw new ValidationError("llm is invalid", [
      { path: "llm.providers", message: "must be an object of providers by name, e.g. { default: { base_url } }" },
    ]);
  }
  for (const [name, p] of Object.entries(options.providers)) {
    const at = `llm.providers.${name}`;
    if (p === null || typeof p !== "object") {
      problems.push({ path: at, message: "must be an object { base_url, api_key?, headers?, cost_per_1k? }" });
      continue;
    }
    let url: URL | null = null;
    try {
      url = new URL(p.base_url);
    } catch {
      // reported below
    }
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
      problems.push({
        path: `${at}.base_url`,
        message: `must be an http(s) URL such as "https://api.openai.com/v1", got ${JSON.stringify(p.base_url)}`,
      });
    }
    if (p.api_key !== undefined && (typeof p.api_key !== "string" || p.api_key === "")) {
      problems.push({ path: `${at}.api_key`, message: "must be a non-empty string when given" });
    }
    if (p.headers !== undefined) {
      const ok =
        p.headers !== null &&
        typeof p.headers === "object" &&
        Object.values(p.headers).every((v) => typeof v === "string");
      if (!ok) problems.push({ path: `${at}.headers`, message: "must be an object of header names to strings" });
    }
    if (p.cost_per_1k !== undefined) {
      const c = p.cost_per_1k as Partial<Record<string, unknown>> | null;
      const price = (v: unknown) => typeof v === "number" && Number.isFinite(v) && v >= 0;
      if (c === null || typeof c !== "object" || !price(c.input) || !price(c.output)) {
        problems.push({
          path: `${at}.cost_per_1k`,
          message: "must be { input, output }: prices per 1,000 tokens, numbers 0 or more",
        });
      }
    }
    providers.set(name, p);
  }
  if (problems.length > 0) throw new ValidationError("llm is invalid", problems);
  return providers;
}

/** The provider a payload names, or the non-retryable failure that says which ones exist. */
export function providerOf(providers: ReadonlyMap<string, LlmProvider>, name: string | undefined): LlmProvider {
  const wanted = name ?? DEFAULT_PROVIDER;
  const found = providers.get(wanted);
  if (found) return found;
  if (providers.size === 0) {
    throw new NonRetryableError(
      `the llm node asks for provider "${wanted}", but this engine has no LLM providers: give createEngine({ llm: { providers: { default: { base_url } } } }), or SKEIN_LLM_BASE_URL to skein serve and skein engine`,
    );
  }
  throw new NonRetryableError(
    `the llm node asks for provider "${wanted}", which this engine does not have; its providers are ${[...providers.keys()].map((k) => `"${k}"`).join(", ")} (engine option llm.providers)`,
  );
}
