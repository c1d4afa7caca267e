/**
 * Interrupting `skein run`: killed with SIGKILL mid-run, `skein resume` recovers the attempt the
 * dead engine held and finishes the run (exit 0); stopped with SIGINT, it closes gracefully,
 * exits 130 and prints the resume command. Synchronised on the run's output lines, not sleeps.
 */
import { describe, expect, it } from "vitest";
import { onPostgres } from "../helpers.js";
import { AGENTS, json, requireBuiltCli, Skein, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

interface RunJson {
  status: string;
  nodes: { node_id: string; state: string; attempt: number; interruptions: number }[];
}

describe("skein run interrupted", () => {
  // SQLite: the dead engine is known at once (its pid). PostgreSQL waits for its heartbeat to expire.
  it.skipIf(onPostgres)("is finished by skein resume after a SIGKILL mid-run", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    const run = new Skein(["run", ws.file("long.json", WORKFLOWS.long), "--agents", AGENTS, ...db], ws.dir);
    const runId = (await run.waitFor(/^run (\S+) started$/m))[1] as string;
    await run.waitFor(/node\.started +b#1 attempt 1/);
    run.proc.kill("SIGKILL");
    expect((await run.result()).signal).toBe("SIGKILL");

    const before = json<RunJson>(await skein(["status", runId, "--json", ...db], ws.dir));
    expect(before.status).toBe("RUNNING");
    expect(before.nodes.find((n) => n.node_id === "b")?.state).toBe("RUNNING");

    const resumed = await skein(["resume", runId, "--agents", AGENTS, ...db], ws.dir);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toMatch(new RegExp(`^run ${runId} resumed \\(RUNNING\\)$`, "m"));
    expect(resumed.stdout).toMatch(/^ +\d+ ms {2}run\.succeeded +SUCCEEDED$/m);

    const after = json<RunJson>(await skein(["status", runId, "--json", ...db], ws.dir));
    expect(after.status).toBe("SUCCEEDED");
    // b ran again as attempt 2 of the same visit, recovered without spending its retry budget (0).
    expect(after.nodes.find((n) => n.node_id === "b")).toMatchObject({
      state: "SUCCEEDED",
      attempt: 2,
      interruptions: 1,
    });
    const events = (await skein(["events", runId, "--json", ...db], ws.dir)).stdout.trim().split("\n");
    expect(events.map((l) => JSON.parse(l) as { type: string; node_id: string })).toContainEqual(
      expect.objectContaining({ type: "node.interrupted", node_id: "b" }),
    );
  });

  it.skipIf(onPostgres)(
    "stops gracefully on SIGINT (exit 130), says how to resume, and resume finishes it",
    async () => {
      const ws = workspace();
      const db = ["--db", ws.db];
      const run = new Skein(["run", ws.file("long.json", WORKFLOWS.long), "--agents", AGENTS, ...db], ws.dir);
      const runId = (await run.waitFor(/^run (\S+) started$/m))[1] as string;
      await run.waitFor(/node\.started +b#1 attempt 1/);
      run.proc.kill("SIGINT");
      const stopped = await run.result();
      expect(stopped.code).toBe(130);
      expect(stopped.stderr).toContain(`skein resume ${runId} --db ${ws.db} --agents ${AGENTS}`);
      // The attempt in flight finished before the engine closed.
      const mid = json<RunJson>(await skein(["status", runId, "--json", ...db], ws.dir));
      expect(mid.status).toBe("RUNNING");
      expect(mid.nodes.find((n) => n.node_id === "b")).toMatchObject({ state: "SUCCEEDED", attempt: 1 });

      const resumed = await skein(["resume", runId, "--agents", AGENTS, "--json", ...db], ws.dir);
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(json<RunJson>(resumed).status).toBe("SUCCEEDED");
    },
  );

  it("exits 2 when resuming an unknown run; an ended run gives its report and exit code", async () => {
    const ws = workspace();
    const db = ["--db", ws.db];
    const failed = await skein(["run", ws.file("f.json", WORKFLOWS.failing), "--agents", AGENTS, ...db], ws.dir);
    const runId = failed.stdout.match(/^run (\S+) started$/m)?.[1] as string;
    const unknown = await skein(["resume", "nope", "--agents", AGENTS, ...db], ws.dir);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^skein: run nope does not exist in /);
    const ended = await skein(["resume", runId, "--agents", AGENTS, ...db], ws.dir);
    expect(ended.code).toBe(1);
    expect(ended.stdout).toMatch(/^run \S+ {2}failing v1 {2}FAILED {2}in /m);
  });
});
