import { defineConfig } from "vitest/config";

/**
 * Projects (`npm test` runs them all). `npm test` runs default and postgres three files at a time
 * (`--maxWorkers=3`): vitest's default on 2 cores is one, and most of these tests wait on
 * processes, browsers and servers rather than on the CPU (21 minutes one at a time, 8 three).
 * - default: every test on SQLite (and the PostgreSQL store's own tests);
 * - postgres: the engine's behaviour suite again on PostgreSQL (test/helpers.ts gives each test
 *   a fresh schema on the local server), with the CLI files whose path differs by store (the
 *   engine process, a run to its end, a crash, prune, the live views); the CLI's client commands
 *   (reviews, cancel, retry, schedules, run ids, an example's review, a run's graph, `skein mcp`'s tools) go through
 *   the same engine calls on both stores that open no database (validate,
 *   help, completion) do not differ by store: on PostgreSQL they would only cost CI minutes
 *   again; and the durable steps of external
 *   workers (test/http/steps.test.ts: a step recorded, fenced and read over HTTP);
 * - processes: several engine processes on PostgreSQL killed or cut off mid-run, the probe
 *   that times the API's answers while a huge tree grows (test/http/bounded-work.test.ts, both
 *   stores), and the packed package in a fresh project running README's program and an example
 *   (test/package/). `npm test` runs it after the others, alone, so that its engines are not
 *   starved of CPU by other tests and the probe's timings are the engine's, not the neighbours';
 * - faults: the fault-injection suite (test/faults/, `npm run test:faults`): engine processes
 *   killed, stopped, skewed and starved of disk, with oracles over the database and a side-effect
 *   sink. Last and alone too, in two workers: case k (k-pg-schedules, a schedule over 100
 *   one-second slots: 100 s of wall clock, its engines idle between slots) is the largest file, so
 *   it starts first and takes one worker for itself, and the other cases (each loading the machine
 *   by itself) run one after another in the other, beside it: 200 s down to 105 here. Each case
 *   has its own time budget, and the budgets add up to under 12 minutes.
 */
export default defineConfig({
  // `skein`, as the examples import it, is src/index.ts here (tsconfig.json `paths`).
  resolve: { tsconfigPaths: true },
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: {
          name: "default",
          include: ["test/**/*.test.ts"],
          exclude: ["test/postgres/**", "test/faults/**", "test/http/bounded-work.test.ts", "test/package/**"],
        },
      },
      {
        extends: true,
        test: {
          name: "postgres",
          include: ["test/engine/**/*.test.ts", "test/cli/**/*.test.ts", "test/http/steps.test.ts"],
          exclude: [
            "test/cli/client-commands.test.ts",
            "test/cli/operate-commands.test.ts",
            "test/cli/review-commands.test.ts",
            "test/cli/run-ids.test.ts",
            "test/cli/schedules.test.ts",
            "test/cli/agents-module.test.ts",
            "test/cli/examples.test.ts",
            "test/cli/graph.test.ts",
            "test/cli/mcp.test.ts",
            // A restarted engine on SQLite knows the dead one's process is gone; the stream is the event log both share.
            "test/cli/stream-resume.test.ts",
            // No database at all, or only an engine in process whose store the engine suite covers.
            "test/cli/completion.test.ts",
            "test/cli/deep-json.test.ts",
            "test/cli/help.test.ts",
            "test/cli/json-times.test.ts",
            "test/cli/summary.test.ts",
            "test/cli/validate.test.ts",
            "test/cli/waiting.test.ts",
          ],
          env: { SKEIN_TEST_DB: "postgres" },
        },
      },
      {
        extends: true,
        test: {
          name: "processes",
          include: ["test/postgres/**/*.test.ts", "test/http/bounded-work.test.ts", "test/package/**/*.test.ts"],
        },
      },
      {
        extends: true,
        test: {
          name: "faults",
          include: ["test/faults/**/*.test.ts"],
          maxWorkers: 2,
          testTimeout: 60_000,
        },
      },
    ],
  },
});
