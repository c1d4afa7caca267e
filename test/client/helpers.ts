/**
 * skein/client against the HTTP API in process on a real port (test/http/helpers.ts: a fresh
 * engine, closed after each test), with the test tokens.
 */
import { createClient, type SkeinClient } from "../../src/client/index.js";
import { fetchApi } from "../helpers.js";
import { TOKENS, testApi } from "../http/helpers.js";

export { TOKENS, WORKFLOWS } from "../http/helpers.js";

/**
 * The tests' fetch: a request that met a connection the server was closing as it was reused is
 * sent again once where that changes nothing (test/helpers.ts fetchApi).
 */
export const testFetch: typeof fetch = (input, init) => fetchApi(input instanceof Request ? input.url : input, init);

/** The API listening on a port, and a client of it per token (null: none). */
export async function listening(options: Parameters<typeof testApi>[0] = {}) {
  const api = await testApi(options);
  const baseUrl = await api.app.listen({ host: "127.0.0.1", port: 0 });
  const client = (token: string | null = TOKENS.admin): SkeinClient =>
    createClient({ baseUrl, ...(token === null ? {} : { token }), fetch: testFetch });
  return { ...api, baseUrl, client };
}
