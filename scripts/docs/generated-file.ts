/**
 * A docs page whose lower part is generated: everything above MARKER is written by hand and kept
 * as it is; everything below it is replaced by the generator. Shared by `npm run gen:docs` and
 * the test that fails when a committed page differs from what the generator makes.
 */
import { readFileSync } from "node:fs";

export const MARKER =
  "<!-- Generated below this line by `npm run gen:docs` (scripts/gen-docs.ts): edit the generator, not this part. -->";

/** The page's new text: its hand-written part (or `intro` for a new page), the marker, then `generated`. */
export function withGenerated(file: string, intro: string, generated: string): string {
  let text: string | null = null;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    // A new page: starts with the default intro.
  }
  const at = text === null ? -1 : text.indexOf(MARKER);
  const head = text !== null && at >= 0 ? text.slice(0, at) : `${intro.trimEnd()}\n\n`;
  return `${head}${MARKER}\n\n${generated.trimEnd()}\n`;
}
