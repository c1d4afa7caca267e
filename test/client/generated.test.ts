/**
 * skein/client is typed from the OpenAPI document: src/client/api-types.ts and operations.ts are
 * what `npm run gen:docs` makes from the document the server serves, and every operation of the
 * document is a method of the client.
 */
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { describe, expect, it } from "vitest";
import { generatedClientFiles } from "../../scripts/client/generated.js";
import { openApi } from "../../scripts/docs/http-reference.js";
import { createClient, OPERATIONS } from "../../src/client/index.js";

describe("skein/client's generated files", () => {
  it("are up to date with the OpenAPI document", { timeout: 60_000 }, async () => {
    const stale: string[] = [];
    for (const file of await generatedClientFiles()) {
      let committed = "";
      try {
        committed = readFileSync(file.file, "utf8");
      } catch {
        // Reported as stale below.
      }
      if (committed !== file.text) stale.push(relative(process.cwd(), file.file));
    }
    expect(stale, `out of date: ${stale.join(", ")}: run \`npm run gen:docs\``).toEqual([]);
  });

  it("give the client a method for every operationId of the document, with its method and path", async () => {
    const document = await openApi();
    const client = createClient();
    const inDocument: Record<string, [string, string]> = {};
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, op] of Object.entries(methods as Record<string, { operationId: string }>)) {
        inDocument[op.operationId] = [method.toUpperCase(), path];
      }
    }
    expect(Object.keys(inDocument).length).toBeGreaterThan(30);
    expect(OPERATIONS).toEqual(inDocument);
    for (const operationId of Object.keys(inDocument)) {
      expect(typeof (client as unknown as Record<string, unknown>)[operationId], operationId).toBe("function");
    }
  });
});
