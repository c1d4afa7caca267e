/**
 * The package's declarations as `npm run build` writes them (tsconfig.build.json, in memory, so
 * no stale dist/ can hide a change), and the checks types.test.ts runs on them: every type a
 * public signature names is exported, and nothing marked `@internal` ships.
 */
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";

const ROOT = resolve(import.meta.dirname, "../..");

/** The emitted .d.ts files of src/, by absolute path under dist/. */
export function emitDeclarations(): Map<string, string> {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, "tsconfig.build.json"),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
      },
    },
  );
  if (!config) throw new Error("tsconfig.build.json could not be read");
  const options = {
    ...config.options,
    emitDeclarationOnly: true,
    declaration: true,
    sourceMap: false,
    declarationMap: false,
  };
  const program = ts.createProgram(config.fileNames, options);
  const files = new Map<string, string>();
  const result = program.emit(undefined, (name, text) => {
    if (name.endsWith(".d.ts")) files.set(resolve(name), text);
  });
  // The emit's own problems only: src/ whole is `npm run typecheck`'s to check (here it cost a minute of CPU).
  const problems = [...program.getOptionsDiagnostics(), ...result.diagnostics];
  if (problems.length > 0) throw new Error(ts.formatDiagnostics(problems, formatHost));
  return files;
}

/** A type a public declaration names that the entry point does not export. */
export interface Unexported {
  name: string;
  /** Where it is declared, relative to dist/. */
  declaredIn: string;
  /** The exported declaration that names it. */
  usedBy: string;
}

/**
 * Every type named by an exported declaration of `entry` (a .d.ts path under dist/) that is
 * declared in the package but not exported from it: a user could see it in a signature and
 * not import it. Types from lib and dependencies, and type parameters, are fine; so is `typeof`
 * of a value (`z.input<typeof WorkflowSchema>`): the user sees and names the type, not the value.
 */
export function unexportedTypes(files: Map<string, string>, entry: string, alsoExported: string[] = []): Unexported[] {
  const host = ts.createCompilerHost({});
  const readFile = host.readFile;
  host.readFile = (name) => files.get(resolve(name)) ?? readFile(name);
  const fileExists = host.fileExists;
  host.fileExists = (name) => files.has(resolve(name)) || fileExists(name);
  const directoryExists = host.directoryExists?.bind(host);
  const dirs = new Set([...files.keys()].flatMap((f) => ancestors(f)));
  host.directoryExists = (name) => dirs.has(resolve(name)) || (directoryExists?.(name) ?? false);
  const program = ts.createProgram(
    [entry, ...alsoExported],
    {
      strict: true,
      noEmit: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      types: ["node"],
    },
    host,
  );
  const diagnostics = ts.getPreEmitDiagnostics(program);
  if (diagnostics.length > 0) throw new Error(ts.formatDiagnostics(diagnostics, formatHost));
  const checker = program.getTypeChecker();
  const resolveAlias = (s: ts.Symbol) => (s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s);
  const exportsOf = (file: string) => {
    const source = program.getSourceFile(file);
    const moduleSymbol = source && checker.getSymbolAtLocation(source);
    if (!moduleSymbol) throw new Error(`${file} was not emitted as a module`);
    return checker.getExportsOfModule(moduleSymbol).map(resolveAlias);
  };
  const own = exportsOf(entry);
  // Types another entry point exports are importable too (`skein/http` signatures name `skein`'s Engine).
  const exported = new Set([...own, ...alsoExported.flatMap(exportsOf)]);
  const isPublic = (s: ts.Symbol): boolean => {
    for (let at: ts.Symbol | undefined = s; at; at = (at as { parent?: ts.Symbol }).parent) {
      if (exported.has(at)) return true;
    }
    return false;
  };
  const inPackage = (d: ts.Declaration) => files.has(resolve(d.getSourceFile().fileName));
  const found = new Map<string, Unexported>();
  for (const symbol of own) {
    for (const declaration of symbol.declarations ?? []) {
      if (!inPackage(declaration)) continue;
      const visit = (node: ts.Node): void => {
        const name = ts.isTypeReferenceNode(node)
          ? node.typeName
          : ts.isExpressionWithTypeArguments(node)
            ? node.expression
            : ts.isImportTypeNode(node) // an inferred type the emitter wrote as import("./x.js").Name
              ? (node.qualifier ?? null)
              : null;
        if (name) {
          const target = checker.getSymbolAtLocation(ts.isQualifiedName(name) ? name.right : name);
          const resolved = target && resolveAlias(target);
          const declared = resolved?.declarations?.[0];
          if (
            resolved &&
            declared &&
            inPackage(declared) &&
            !ts.isTypeParameterDeclaration(declared) &&
            !isPublic(resolved)
          ) {
            const declaredIn = relative(join(ROOT, "dist"), declared.getSourceFile().fileName);
            found.set(`${resolved.name} ${declaredIn}`, { name: resolved.name, declaredIn, usedBy: symbol.name });
          }
        }
        if (!ts.isTypeQueryNode(node)) ts.forEachChild(node, visit);
      };
      visit(declaration);
    }
  }
  return [...found.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/** The `@internal` markers left in the declarations (stripInternal should remove them all), as `file: line`. */
export function internalLeft(files: Map<string, string>): string[] {
  const left: string[] = [];
  for (const [name, text] of files) {
    text.split("\n").forEach((line, i) => {
      if (line.includes("@internal")) left.push(`${relative(ROOT, name)}:${i + 1}: ${line.trim()}`);
    });
  }
  return left;
}

function ancestors(file: string): string[] {
  const out: string[] = [];
  for (let d = dirname(file); d !== dirname(d); d = dirname(d)) out.push(d);
  return out;
}

const formatHost: ts.FormatDiagnosticsHost = {
  getCanonicalFileName: (f) => f,
  getCurrentDirectory: () => ROOT,
  getNewLine: () => "\n",
};

/** A file of the package's dist/, by its path there. */
export const distPath = (name: string) => join(ROOT, "dist", name);
