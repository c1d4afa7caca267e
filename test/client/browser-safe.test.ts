/**
 * skein/client and skein/react run in browsers: the JavaScript tsc emits for them (each file
 * transpiled here as the build does, so types-only imports are gone) imports no `node:` module
 * and no other part of the engine, only their own files, eventsource-parser, react and skein/client.
 */
import { readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const compilerOptions = (() => {
  const { config } = ts.readConfigFile(join(ROOT, "tsconfig.build.json"), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, ROOT);
  // ESM, as tsc emits it for this "type": "module" package (transpileModule alone cannot tell).
  return { ...options, module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler };
})();

/** Every import of the emitted JavaScript reachable from `entry`: [importing file, specifier]. */
function emittedImports(entry: string): [string, string][] {
  const found: [string, string][] = [];
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const { outputText } = ts.transpileModule(readFileSync(file, "utf8"), { compilerOptions, fileName: file });
    const source = ts.createSourceFile(file, outputText, ts.ScriptTarget.ES2022);
    const specifiers: string[] = [];
    const walk = (node: ts.Node) => {
      if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier) {
        specifiers.push((node.moduleSpecifier as ts.StringLiteral).text);
      } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
        const [arg] = node.arguments;
        specifiers.push(arg && ts.isStringLiteral(arg) ? arg.text : "<dynamic>");
      }
      ts.forEachChild(node, walk);
    };
    walk(source);
    for (const specifier of specifiers) {
      found.push([relative(ROOT, file), specifier]);
      if (specifier.startsWith(".")) visit(resolve(dirname(file), specifier.replace(/\.js$/, ".ts")));
    }
  };
  visit(join(ROOT, entry));
  return found;
}

describe("the browser entry points", () => {
  it("skein/client imports only its own files and eventsource-parser", () => {
    const imports = emittedImports("src/client/index.ts");
    const outside = imports.filter(([file, s]) => {
      if (s === "eventsource-parser") return false;
      return !(s.startsWith(".") && resolve(ROOT, dirname(file), s).startsWith(join(ROOT, "src/client/")));
    });
    expect(outside).toEqual([]);
    // It reaches the files it is made of (a walk that found nothing would pass the line above).
    expect(new Set(imports.map(([file]) => file))).toContain("src/client/subscribe.ts");
  });

  it("skein/react imports only its own files, react and skein/client", () => {
    const imports = emittedImports("src/react/index.ts");
    const outside = imports.filter(([file, s]) => {
      if (s === "react" || s === "skein/client") return false;
      return !(s.startsWith(".") && resolve(ROOT, dirname(file), s).startsWith(join(ROOT, "src/react/")));
    });
    expect(outside).toEqual([]);
    expect(imports.map(([, s]) => s)).toContain("skein/client");
  });
});
