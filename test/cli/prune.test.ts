/**
 * `skein prune` through the built command on both stores: --dry-run counts and deletes
 * nothing, a prune deletes the finished runs (status then says they do not exist), --status
 * keeps the others, and bad input exits 2.
 */
import { describe, expect, it } from "vitest";
import { AGENTS, json, requireBuiltCli, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

describe("skein prune", () => {
  it("counts with --dry-run, deletes finished runs by status, and refuses a bad duration or status (exit 2)", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    const ok = await skein(["run", ws.file("s.json", WORKFLOWS.small), "--agents", AGENTS, "--json", ...db], ws.dir);
    expect(ok.code, ok.stderr).toBe(0);
    const failed = await skein(
      ["run", ws.file("f.json", WORKFLOWS.failing), "--agents", AGENTS, "--json", ...db],
      ws.dir,
    );
    expect(failed.code).toBe(1);
    const okId = json<{ run_id: string }>(ok).run_id;
    const failedId = json<{ run_id: string }>(failed).run_id;

    // Both ended in earlier processes, so before now: an age of 0 reaches them.
    const young = await skein(["prune", "--older-than", "30d", "--json", ...db], ws.dir);
    expect(json(young)).toEqual({ pruned: 0 });
    const dry = await skein(["prune", "--older-than", "0", "--dry-run", ...db], ws.dir);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toBe("2 runs would be deleted (dry run: nothing deleted)\n");
    const onlyFailed = await skein(["prune", "--older-than", "0s", "--status", "failed", ...db], ws.dir);
    expect(onlyFailed.stdout).toBe("deleted 1 run\n");
    expect((await skein(["status", failedId, ...db], ws.dir)).code).toBe(2);
    expect((await skein(["status", okId, ...db], ws.dir)).code).toBe(0);

    const badAge = await skein(["prune", "--older-than", "30 days", ...db], ws.dir);
    expect(badAge.code).toBe(2);
    expect(badAge.stderr).toContain('"90s", "45m", "12h", "30d"');
    const badStatus = await skein(["prune", "--older-than", "1d", "--status", "running", ...db], ws.dir);
    expect(badStatus.code).toBe(2);
    expect(badStatus.stderr).toContain('"running" is not a status runs are pruned in');
    expect((await skein(["status", okId, ...db], ws.dir)).code).toBe(0);
  });
});
