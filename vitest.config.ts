import { defineConfig } from "vitest/config";

/**
 * Two projects: every test on SQLite, and the engine's behaviour suite and the CLI's again on
 * PostgreSQL (test/helpers.ts gives each test a fresh schema on the local server).
 */
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      { extends: true, test: { name: "default", include: ["test/**/*.test.ts"] } },
      {
        extends: true,
        test: {
          name: "postgres",
          include: ["test/engine/**/*.test.ts", "test/cli/**/*.test.ts"],
          env: { SKEIN_TEST_DB: "postgres" },
        },
      },
    ],
  },
});
