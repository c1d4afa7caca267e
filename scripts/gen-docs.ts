/**
 * Writes the generated parts of docs/: the workflow format reference (from the JSON Schema) and
 * the CLI reference (from every command's --help) and the HTTP routes (from the OpenAPI document
 * the server serves): `npm run gen:docs`. test/docs/generated.test.ts
 * fails when a committed page differs from what this writes.
 */
import { writeFileSync } from "node:fs";
import { generatedPages } from "./docs/pages.js";

for (const page of await generatedPages()) {
  writeFileSync(page.file, page.text);
  console.log(`wrote ${page.file}`);
}
