/** docs/workflow-format.md and docs/cli.md are what `npm run gen:docs` makes from the schema and the CLI. */
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { describe, expect, it } from "vitest";
import { generatedPages } from "../../scripts/docs/pages.js";

describe("generated docs pages", () => {
  it("are up to date with the schema and the CLI", { timeout: 120_000 }, async () => {
    const stale: string[] = [];
    for (const page of await generatedPages()) {
      let committed = "";
      try {
        committed = readFileSync(page.file, "utf8");
      } catch {
        // Reported as stale below.
      }
      if (committed !== page.text) stale.push(relative(process.cwd(), page.file));
    }
    expect(stale, `out of date: ${stale.join(", ")}: run \`npm run gen:docs\``).toEqual([]);
  });
});
