/**
 * The commands that operate runs through a client (no engine, DESIGN §16): pause, unpause,
 * fail-node, bulk, fork and migrate. Apart from client-commands.test.ts so that the two files
 * run side by side.
 */
import { describe, expect, it } from "vitest";
import { json, lines, type RunJson, requireBuiltCli, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

describe("skein pause, unpause, fail-node, bulk, fork", () => {
  it("pauses a run, lists it with --paused, shows why in status, unpauses it; fail-node refuses a node not reached", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ws.file("w.json", WORKFLOWS.small), ...db], ws.dir);
    const runId = (await skein(["start", "small", ...db], ws.dir)).stdout.trim();
    const paused = await skein(["pause", runId, "--reason", "provider outage", "--by", "ops", ...db], ws.dir);
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout).toBe(`run ${runId} RUNNING, paused by ops: provider outage\n`);
    const listed = await skein(["list", "--paused", ...db], ws.dir);
    expect(listed.stdout).toContain(`${runId}  small v1`);
    expect(listed.stdout).toContain("RUNNING (paused)");
    const status = await skein(["status", runId, ...db], ws.dir);
    expect(status.stdout).toContain(`paused by ops: provider outage; skein unpause ${runId} lets its nodes start`);
    const refused = await skein(["fail-node", runId, "b", ...db], ws.dir);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("node b of run");
    expect(refused.stderr).toContain("it has not been reached yet");
    const bulkPaused = await skein(["bulk", "pause", "--workflow", "small", "--reason", "outage", ...db], ws.dir);
    expect(bulkPaused.stdout).toBe("0 runs paused\n"); // paused already
    const forkNeedsFrom = await skein(["bulk", "fork", "--workflow", "small", ...db], ws.dir);
    expect(forkNeedsFrom.code).toBe(2);
    expect(forkNeedsFrom.stderr).toContain("skein bulk fork needs --from <node_id>");
    const unpaused = await skein(["unpause", runId, "--json", ...db], ws.dir);
    expect(unpaused.code, unpaused.stderr).toBe(0);
    expect(json<{ paused: unknown }>(unpaused).paused).toBeNull();
    expect(json<unknown[]>(await skein(["list", "--paused", "--json", ...db], ws.dir))).toEqual([]);
  });

  it("skein start --key queues a second start behind the running one; status and list --status QUEUED show it", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ws.file("w.json", WORKFLOWS.small), ...db], ws.dir);
    const first = await skein(["start", "small", "--key", "thread-1", ...db], ws.dir);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toBe("");
    const second = await skein(["start", "small", "--key", "thread-1", ...db], ws.dir);
    const queuedId = second.stdout.trim();
    expect(second.stderr).toContain('queued behind the running run of key "thread-1"');
    const rejected = await skein(["start", "small", "--key", "thread-1", "--on-active", "reject", ...db], ws.dir);
    expect(rejected.code).toBe(2);
    expect(rejected.stderr).toContain(first.stdout.trim());
    const listed = await skein(["list", "--status", "QUEUED", "--json", ...db], ws.dir);
    expect(json<RunJson[]>(listed).map((r) => r.run_id)).toEqual([queuedId]);
    const status = await skein(["status", queuedId, ...db], ws.dir);
    expect(status.stdout).toContain("QUEUED");
    expect(status.stdout).toContain('queued behind the running run of key "thread-1"');
    const debounced = await skein(["start", "small", "--key", "doc", "--debounce", "30", ...db], ws.dir);
    expect(debounced.stderr).toContain("queued: debounced until");
    const badDebounce = await skein(["start", "small", "--key", "doc", "--debounce", "soon", ...db], ws.dir);
    expect(badDebounce.code).not.toBe(0);
    expect(badDebounce.stderr).toContain("give a number of seconds above 0");
  });

  it("skein bulk: a dry run counts the tagged runs, cancel stops at --cap and says to run again, retry brings them back", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ws.file("w.json", WORKFLOWS.small), ...db], ws.dir);
    // No engine runs here: started runs stay RUNNING.
    const start = async (...args: string[]) => (await skein(["start", "small", ...args, ...db], ws.dir)).stdout.trim();
    const tagged = [await start("--tag", "batch=x"), await start("--tag", "batch=x"), await start("--tag", "batch=x")];
    const other = await start();
    const bulk = (...args: string[]) => skein(["bulk", ...args, ...db], ws.dir);

    const dry = await bulk("cancel", "--tag", "batch=x", "--dry-run", "--json");
    expect(dry.code, dry.stderr).toBe(0);
    expect(json<{ matched: number; run_ids: string[] }>(dry)).toMatchObject({ matched: 3, applied: 0, more: false });
    expect((await bulk("cancel", "--tag", "batch=x", "--dry-run")).stdout).toMatch(
      /^3 runs would be cancelled, e\.g\. /,
    );

    const first = await bulk("cancel", "--tag", "batch=x", "--cap", "2", "--reason", "recall");
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe("2 runs cancelled\nmore runs match than the cap: run it again\n");
    expect((await bulk("cancel", "--tag", "batch=x", "--cap", "2")).stdout).toBe("1 run cancelled\n");
    const statuses = async () => {
      const r = await skein(["list", "--json", ...db], ws.dir);
      return Object.fromEntries(json<{ run_id: string; status: string }[]>(r).map((run) => [run.run_id, run.status]));
    };
    expect(await statuses()).toEqual({
      ...Object.fromEntries(tagged.map((id) => [id, "CANCELLED"])),
      [other]: "RUNNING",
    });

    const retried = await bulk("retry", "--tag", "batch=x", "--workflow", "small", "--workflow-version", "1", "--json");
    expect(json(retried)).toMatchObject({ matched: 3, applied: 3, refused: [] });
    expect(Object.values(await statuses())).toEqual(Array(4).fill("RUNNING"));

    // Usage errors and refused calls exit 2.
    const usage = [
      ["cancel", "--cap", "0"],
      ["explode"],
      ["cancel", "--workflow-version", "1"],
      ["cancel", "--since", "soon"],
    ];
    const refused = await Promise.all(usage.map((args) => bulk(...args)));
    expect(refused.map((r) => r.code)).toEqual([2, 2, 2, 2]);
    expect(refused[2]?.stderr).toContain("filter.workflow_version");
  }, 90_000);

  it("forks a run from a node with an edited input and payload (no engine runs either); an unknown node exits 2", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    await skein(["workflows", "put", ws.file("w.json", WORKFLOWS.small), ...db], ws.dir);
    const source = (await skein(["start", "small", "--input", '{"n":1}', ...db], ws.dir)).stdout.trim();
    const forked = await skein(
      ["fork", source, "--from", "b", "--input", '{"n":2}', "--payload", 'b={"fail_times":0}', "--json", ...db],
      ws.dir,
    );
    expect(forked.code, forked.stderr).toBe(0);
    const run = json<{ run_id: string; input: unknown; forked_from: unknown }>(forked);
    expect(run).toMatchObject({ input: { n: 2 }, forked_from: { run_id: source, node_id: "b" } });
    const status = json<{ nodes: { node_id: string; payload: unknown }[] }>(
      await skein(["status", run.run_id, "--json", ...db], ws.dir),
    );
    expect(status.nodes.find((n) => n.node_id === "b")?.payload).toEqual({ fail_times: 0 });
    const events = lines(await skein(["events", run.run_id, "--json", ...db], ws.dir)) as { type: string }[];
    expect(events.map((e) => e.type).slice(0, 2)).toEqual(["run.started", "run.forked"]);

    const plain = await skein(["fork", source, "--from", "a", ...db], ws.dir);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);
    const bad = await skein(["fork", source, "--from", "nope", ...db], ws.dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('has no node "nope"');
    const badPayload = await skein(["fork", source, "--from", "a", "--payload", "b", ...db], ws.dir);
    expect(badPayload.code).toBe(2);
    expect(badPayload.stderr).toContain("expected node_id=json");
  });
});

describe("skein migrate", () => {
  it("moves running runs to a newer version, prints each refused run with its reasons, and moves nothing with --dry-run", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    const put = (nodes: object[]) => skein(["workflows", "put", ws.file("m.json", { id: "m", nodes }), ...db], ws.dir);
    await put([{ node_id: "a", agent_type: "echo" }]);
    // Started without an engine: a's visit is ready, no attempt runs.
    const started = { run_id: (await skein(["start", "m", ...db], ws.dir)).stdout.trim() };
    await put([
      { node_id: "a", agent_type: "echo" },
      { node_id: "b", agent_type: "echo", depends_on: ["a"] },
    ]);
    await put([{ node_id: "z", agent_type: "echo" }]);

    const refused = await skein(["migrate", "m", "--to", "3", ...db], ws.dir);
    expect(refused.code, refused.stderr).toBe(0);
    expect(refused.stdout).toBe(
      [
        "moved 0 runs of m to version 3",
        "1 run stays as it is:",
        `  ${started.run_id}  version 1`,
        '    - node "a" has a visit (PENDING) but the new version has no such node',
        "",
      ].join("\n"),
    );
    const dry = await skein(
      ["migrate", "m", "--to", "2", "--run", started.run_id, "--dry-run", "--json", ...db],
      ws.dir,
    );
    expect(json(dry)).toEqual({
      moved: [{ run_id: started.run_id, from_version: 1 }],
      incompatible: [],
      dry_run: true,
    });
    const moved = await skein(["migrate", "m", "--to", "2", "--from", "1", ...db], ws.dir);
    expect(moved.stdout).toBe(`moved 1 run of m to version 2\n  ${started.run_id}  from version 1\n`);
    const status = json<RunJson & { workflow_version: number }>(
      await skein(["status", started.run_id, "--json", ...db], ws.dir),
    );
    expect(status.workflow_version).toBe(2);
    expect(status.nodes.map((n) => n.node_id).sort()).toEqual(["a", "b"]);
    const bad = await skein(["migrate", "m", "--to", "2", "--from", "2", ...db], ws.dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("from_version: must be older than to_version (2)");
  });
});
