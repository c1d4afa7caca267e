import { dropLeftoverSchemas, tempSchema } from "./postgres.js";
import { benchSteps } from "./steps.js";

const pg = process.argv[2] === "pg";
const r = await benchSteps(pg ? { db: tempSchema } : {});
console.log(JSON.stringify(r.metrics));
await dropLeftoverSchemas();
process.exit(0);
