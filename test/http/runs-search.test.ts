/** GET /v1/runs filters: text in input or output (q), id prefix or part, creation time; bad values are precise 400s. */
import { describe, expect, it } from "vitest";
import type { TokenEntry } from "../../src/http/auth.js";
import { bearer, TOKEN_LIST, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

const SCOPED = "orders-reader-0123456789abcdef";
const TOKENS_WITH_SCOPE: TokenEntry[] = [
  ...TOKEN_LIST,
  { token: SCOPED, role: "reviewer", name: "orders", workflows: ["order-*"] },
];

async function searchApi() {
  const t = await testApi({ server: { tokens: TOKENS_WITH_SCOPE } });
  const runs: Record<string, string> = {};
  for (const id of ["order-eu", "payroll"]) {
    await t.engine.registerWorkflow({ ...WORKFLOWS.simple, id });
    const run = await t.engine.startRun(id, { input: { note: `Invoice 50%_off for ${id}` } });
    await t.engine.waitForRun(run.run_id);
    runs[id] = run.run_id;
    await t.clock.advance(1_000);
  }
  const list = async (query: string, token: string = TOKENS.admin) => {
    const res = await t.app.inject({ url: `/v1/runs?${query}`, headers: bearer(token) });
    return res;
  };
  const ids = async (query: string, token: string = TOKENS.admin) =>
    (await list(query, token)).json().runs.map((r: { run_id: string }) => r.run_id);
  return { ...t, runs, list, ids };
}

describe("GET /v1/runs search", () => {
  it("finds runs by text in their input, literally and case-insensitively, within the token's scope", async () => {
    const { runs, ids } = await searchApi();
    expect(await ids(`q=${encodeURIComponent("invoice 50%_OFF")}`)).toEqual([runs.payroll, runs["order-eu"]]);
    expect(await ids(`q=${encodeURIComponent("for payroll")}`)).toEqual([runs.payroll]);
    expect(await ids(`q=${encodeURIComponent("%_%")}`)).toEqual([]);
    expect(await ids(`q=${encodeURIComponent("' OR ''='")}`)).toEqual([]);
    expect(await ids(`q=${encodeURIComponent('"note"')}`)).toEqual([]); // a key, quoted, is not a value's text
    expect(await ids("q=invoice", SCOPED)).toEqual([runs["order-eu"]]);
    expect(await ids("q=invoice&workflow_id=payroll", SCOPED)).toEqual([]);
  });

  it("pages a search with the cursor, and filters by id prefix, id part and creation time", async () => {
    const { runs, list, ids, engine } = await searchApi();
    const first = await list("q=invoice&limit=1");
    expect(first.json().runs.map((r: { run_id: string }) => r.run_id)).toEqual([runs.payroll]);
    const cursor = first.json().next_cursor as string;
    expect(await ids(`q=invoice&limit=1&cursor=${encodeURIComponent(cursor)}`)).toEqual([runs["order-eu"]]);
    const eu = await engine.getRun(runs["order-eu"] as string);
    expect(await ids(`id_prefix=${eu.run_id.slice(0, 32)}`)).toEqual([eu.run_id]);
    expect(await ids(`id_contains=${eu.run_id.slice(-12).toUpperCase()}`)).toEqual([eu.run_id]);
    expect(await ids(`id_contains=${encodeURIComponent("%")}`)).toEqual([]);
    expect(await ids(`created_before=${eu.created_at + 1}`)).toEqual([eu.run_id]);
    expect(await ids(`created_after=${eu.created_at + 1}`)).toEqual([runs.payroll]);
    expect(await ids(`created_after=${eu.created_at}&created_before=${eu.created_at + 1}&q=invoice`)).toEqual([
      eu.run_id,
    ]);
  });

  it("answers 400 with the parameter's path for a q too short, too long or with control characters", async () => {
    const { list } = await searchApi();
    const problem = async (query: string) => {
      const res = await list(query);
      expect(res.statusCode).toBe(400);
      const [first] = res.json().error.details.problems;
      return `${first.path}: ${first.message}`;
    };
    expect(await problem("q=ab")).toMatch(/^query\.q: .*at least 3 characters/);
    expect(await problem(`q=${"x".repeat(201)}`)).toMatch(/^query\.q: .*200/);
    // A NUL is refused for every query value at once (server.ts), by its own message.
    expect(await problem("q=abc%00def")).toMatch(/^query\.q: holds a NUL character/);
    expect(await problem("q=abc%0Adef")).toMatch(/^query\.q: .*control characters/);
    expect(await problem("created_after=yesterday")).toMatch(/^query\.created_after: /);
    expect(await problem("id_prefix=")).toMatch(/^query\.id_prefix: /);
    expect(await problem("id_contains=")).toMatch(/^query\.id_contains: /);
    expect(await problem("id_contains=ab%00")).toMatch(/^query\.id_contains: holds a NUL character/);
    expect(await problem("id_contains=ab%0A")).toMatch(/^query\.id_contains: .*control characters/);
  });
});
