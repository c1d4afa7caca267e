/** Writes schema/workflow.schema.json from the zod schema: `npm run gen:schema`. */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { workflowJsonSchemaText } from "../src/definition/json-schema.js";

const file = resolve(dirname(fileURLToPath(import.meta.url)), "../schema/workflow.schema.json");
mkdirSync(dirname(file), { recursive: true });
writeFileSync(file, workflowJsonSchemaText());
console.log(`wrote ${file}`);
