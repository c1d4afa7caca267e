/**
 * `npm run bench` checks what its chosen measurements need (chromium, a PostgreSQL server) before
 * the first one runs, says what is missing and how to get it, and leaves latest.json alone.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { missingPrerequisites } from "../../bench/prerequisites.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const LATEST = join(ROOT, "bench", "results", "latest.json");

/** bench/run.ts with `args`, in a process of its own; its exit code and stderr. */
function bench(args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", join(ROOT, "bench", "run.ts"), ...args],
      { cwd: ROOT, env: { ...process.env, ...env } },
      (error, _stdout, stderr) => resolve({ code: error ? (error.code as number | null) : 0, stderr }),
    );
  });
}

const readLatest = () => {
  try {
    return readFileSync(LATEST, "utf8");
  } catch {
    return undefined;
  }
};

describe("npm run bench's prerequisites", () => {
  it("stops before any measurement when chromium and the PostgreSQL server are missing, naming both and how to get them", async () => {
    const before = readLatest();
    const r = await bench(["dag8", "http_ui_load", "pg_dag8"], {
      SKEIN_CHROMIUM: "/nonexistent/chromium",
      // Port 1: nothing listens there, so the connection is refused at once.
      BENCH_PG_URL: "postgres://postgres@127.0.0.1:1/test",
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("npm run bench needs what this machine does not have:");
    expect(r.stderr).toMatch(/chromium at \/nonexistent\/chromium, for http_ui_load .*apt-get install -y chromium/);
    expect(r.stderr).toMatch(
      /a PostgreSQL server at postgres:\/\/postgres@127\.0\.0\.1:1\/test \(BENCH_PG_URL\), for pg_dag8: .*ECONNREFUSED.*set BENCH_PG_URL/,
    );
    // No measurement started (each prints `<name>...` first), and the last results are intact.
    expect(r.stderr).not.toMatch(/^dag8\.\.\.$/m);
    expect(readLatest()).toBe(before);
  });

  const MISSING = { chromium: "/nonexistent/chromium", pgUrl: "postgres://postgres@127.0.0.1:1/test" };

  it("asks only what the chosen measurements need: the SQLite ones need neither", async () => {
    const sqliteOnly = [
      { name: "dag8", section: "sqlite" },
      { name: "cli", section: "cli" },
      { name: "http_claim_complete", section: "http" },
    ];
    expect(await missingPrerequisites(sqliteOnly, MISSING)).toEqual([]);
    const missing = await missingPrerequisites([...sqliteOnly, { name: "pg_xproc", section: "postgres" }], MISSING);
    expect(missing).toEqual([expect.stringMatching(/^a PostgreSQL server at .*, for pg_xproc: /)]);
  });

  it("finds this machine's chromium and PostgreSQL server (npm test installs and needs them)", async () => {
    const all = [
      { name: "http_ui_load", section: "http" },
      { name: "pg_dag8", section: "postgres" },
    ];
    expect(await missingPrerequisites(all)).toEqual([]);
  });
});
