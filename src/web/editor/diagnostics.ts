/**
 * The server's problems (and a JSON syntax error) as lint diagnostics at the text they are about:
 * a problem's path is located in the text it was found in (json-scan), a syntax error at the
 * position the browser's JSON parser names.
 */
import type { Diagnostic } from "@codemirror/lint";
import type { Problem } from "../types.js";
import { locate, parsePath } from "./json-scan.js";

/** The range a problem marks: the value at its path, a container by its key (or first character). */
export function problemRange(text: string, path: string): { from: number; to: number } {
  const found = locate(text, parsePath(path));
  const first = text[found.from];
  const container = first === "{" || first === "[";
  if (found.complete && !container) return { from: found.from, to: found.to };
  if (found.key) return found.key;
  return { from: found.from, to: Math.min(found.from + 1, text.length) };
}

export function problemDiagnostics(text: string, errors: Problem[], warnings: Problem[]): Diagnostic[] {
  const one = (p: Problem, severity: "error" | "warning"): Diagnostic => ({
    ...problemRange(text, p.path),
    severity,
    source: p.path,
    message: p.message,
  });
  return [...errors.map((p) => one(p, "error")), ...warnings.map((p) => one(p, "warning"))];
}

/** Where `JSON.parse(text)` failed, marked on the token there. */
export function syntaxDiagnostic(text: string, message: string): Diagnostic {
  const at = /position (\d+)/.exec(message);
  let from = at ? Math.min(Number(at[1]), text.length) : text.length;
  // "Unexpected end of JSON input" and errors at the end: mark the last character typed.
  if (from >= text.length) from = Math.max(0, text.trimEnd().length - 1);
  const token = /^[^\s,:{}[\]]*/.exec(text.slice(from))?.[0].length ?? 0;
  return { from, to: Math.min(from + Math.max(1, token), text.length), severity: "error", source: "JSON", message };
}
