/** docs/workflow-format.md, docs/cli.md and docs/http-api.md are what `npm run gen:docs` makes from the schema, the CLI and the OpenAPI document. */
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { describe, expect, it } from "vitest";
import { generatedPages } from "../../scripts/docs/pages.js";

describe("generated docs pages", () => {
  it("are up to date with the schema, the CLI and the API", { timeout: 120_000 }, async () => {
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
