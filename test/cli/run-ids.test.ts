/**
 * Abbreviated run ids: a unique start or end of an id (at least 4 characters) works wherever a
 * run id is taken; an ambiguous one exits 2 listing the runs. And --json's ISO times.
 */
import { describe, expect, it } from "vitest";
import { commandsMs, json, type Result, requireBuiltCli, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

async function threeRuns() {
  const ws = workspace();
  const db = ["--db", ws.db];
  const cli = (...args: string[]) => skein([...args, ...db], ws.dir);
  const put = await cli("workflows", "put", ws.file("w.json", WORKFLOWS.withInput));
  expect(put.code, put.stderr).toBe(0);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await cli("start", "with-input", "--input", JSON.stringify({ topic: `t${i}` }));
    expect(r.code, r.stderr).toBe(0);
    ids.push(r.stdout.trim());
  }
  return { cli, ids };
}

const runIdOf = (r: Result) => json<{ run_id: string }>(r).run_id;

describe("abbreviated run ids", () => {
  it(
    "finds a run by a unique end of its id (the random part) or a unique start, in every command",
    async () => {
      const { cli, ids } = await threeRuns();
      const [first, second] = ids as [string, string];
      const tail = first.slice(-8);
      const status = await cli("status", tail, "--json");
      expect(status.code, status.stderr).toBe(0);
      expect(runIdOf(status)).toBe(first);
      // Uppercase, as copied from elsewhere.
      expect(runIdOf(await cli("status", first.slice(-12).toUpperCase(), "--json"))).toBe(first);
      // A start long enough to be unique (the head is the start time, which the runs share).
      const head = await cli("status", second.slice(0, 34), "--json");
      expect(runIdOf(head)).toBe(second);
      const events = await cli("events", tail, "--json");
      expect(events.code, events.stderr).toBe(0);
      expect(events.stdout).toContain(`"run_id":"${first}"`);
      const graph = await cli("graph", tail);
      expect(graph.code, graph.stderr).toBe(0);
      const sent = await cli("send", second.slice(-6), "ping");
      expect(sent.code, sent.stderr).toBe(0);
      const cancelled = await cli("cancel", tail);
      expect(cancelled.code, cancelled.stderr).toBe(0);
      expect(cancelled.stdout).toBe(`run ${first} CANCELLED\n`);
    },
    commandsMs(12),
  );

  it("exits 2 for an ambiguous abbreviation, listing the runs it names with their workflow and start", async () => {
    const { cli, ids } = await threeRuns();
    // Runs started within a few seconds share their first 6 characters (the time in units of 4.6 hours).
    const r = await cli("status", (ids[0] as string).slice(0, 6));
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/^skein: run id \w{6} is ambiguous: it names 3 runs; type more of it:\n/);
    for (const id of ids)
      expect(r.stderr).toMatch(new RegExp(`^  ${id}  with-input  started \\d{4}-\\d\\d-\\d\\dT`, "m"));
  });

  it("needs at least 4 characters, and says when nothing matches", async () => {
    const { cli, ids } = await threeRuns();
    const short = await cli("status", (ids[0] as string).slice(-3));
    expect(short.code).toBe(2);
    expect(short.stderr).toMatch(/does not exist in .*\(an abbreviated run id needs at least 4 characters/);
    const none = await cli("status", "zzzzzz");
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/^skein: run zzzzzz does not exist in .*\(no run id starts or ends with it either\)/);
  });
});

describe("--json times", () => {
  it("gives x_at_iso beside each epoch-ms x_at, and at_iso beside an event's at", async () => {
    const { cli, ids } = await threeRuns();
    const run = json<Record<string, unknown>>(await cli("status", ids[0] as string, "--json"));
    expect(typeof run.created_at).toBe("number");
    expect(run.created_at_iso).toBe(new Date(run.created_at as number).toISOString());
    expect(run.ended_at).toBeNull();
    expect(run.ended_at_iso).toBeNull();
    // The user's own input is printed as it is.
    expect(run.input).toEqual({ topic: "t0" });
    const nodes = run.nodes as Record<string, unknown>[];
    expect(nodes[0]?.created_at_iso).toBe(new Date(nodes[0]?.created_at as number).toISOString());
    const events = (await cli("events", ids[0] as string, "--json")).stdout.trim().split("\n");
    const first = JSON.parse(events[0] as string) as { at: number; at_iso: string };
    expect(first.at_iso).toBe(new Date(first.at).toISOString());
    const listed = json<{ created_at: number; created_at_iso: string }[]>(await cli("list", "--json"));
    expect(listed[0]?.created_at_iso).toBe(new Date(listed[0]?.created_at as number).toISOString());
  });
});
