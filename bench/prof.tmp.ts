import { benchClaims, CLAIM_VARIANTS } from "./claims.js";
const which = process.argv.slice(2);
await benchClaims(CLAIM_VARIANTS.filter((v) => which.includes(v.name)));
