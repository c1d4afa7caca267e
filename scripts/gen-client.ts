/**
 * Writes skein/client's generated files (src/client/api-types.ts, src/client/operations.ts) from
 * the OpenAPI document the server serves: part of `npm run gen:docs`.
 * test/client/generated.test.ts fails when a committed one differs from what this writes.
 */
import { writeFileSync } from "node:fs";
import { generatedClientFiles } from "./client/generated.js";

for (const file of await generatedClientFiles()) {
  writeFileSync(file.file, file.text);
  console.log(`wrote ${file.file}`);
}
