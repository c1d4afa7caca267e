/**
 * The package as a user gets it: `npm pack` of this checkout (dist/ built first), installed in a
 * fresh `npm init -y` project, where README's "Use" program (read from README.md, so the two
 * cannot drift) and the content-publish example run as written and succeed.
 *
 * Installed by hand, the way npm lays it out, because `npm install <tarball>` resolves skein's
 * dependencies through the registry (3 to 4 minutes on a cold cache here, better-sqlite3
 * compiled; CI has no warm cache and should need no network): the tarball is unpacked into
 * node_modules/skein, its bins are linked into node_modules/.bin, and each of its `dependencies`
 * (those only: a module of dist/ that needs a devDependency fails here) is a link to this
 * checkout's installed copy. What the test covers is what npm does not: the files the package
 * ships (`files`), its `exports` and `bin`, examples that import `skein` by name, and the README.
 */
import { execFile } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const run = promisify(execFile);

/** README's "Use" program: the first ```ts block after its heading. */
function readmeProgram(readme: string): string {
  const use = readme.indexOf("\n## Use\n");
  const block = /```ts\n([\s\S]*?)```/.exec(readme.slice(use));
  if (use < 0 || !block?.[1]) throw new Error('README.md has no "## Use" section with a ```ts block');
  return block[1];
}

let dir: string;
let project: string;

beforeAll(async () => {
  if (!existsSync(join(ROOT, "dist", "index.js"))) {
    throw new Error("dist/ is missing: run `npm run build` first (npm test does)");
  }
  dir = mkdtempSync(join(tmpdir(), "skein-package-"));
  const packed = await run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", dir], { cwd: ROOT });
  const tarball = join(dir, (JSON.parse(packed.stdout) as { filename: string }[])[0]?.filename ?? "");

  project = join(dir, "app");
  mkdirSync(project);
  await run("npm", ["init", "-y"], { cwd: project });
  const installed = join(project, "node_modules", "skein");
  mkdirSync(installed, { recursive: true });
  await run("tar", ["-xzf", tarball, "-C", installed, "--strip-components=1"]);

  const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8")) as {
    bin: Record<string, string>;
    dependencies: Record<string, string>;
  };
  const bin = join(project, "node_modules", ".bin");
  mkdirSync(bin);
  const linkBins = (pkg: string, bins: Record<string, string>) => {
    for (const [name, file] of Object.entries(bins)) symlinkSync(join("..", pkg, file), join(bin, name));
  };
  linkBins("skein", manifest.bin);
  // npm install makes a bin executable; the tarball's modes are not.
  for (const file of Object.values(manifest.bin)) chmodSync(join(installed, file), 0o755);
  for (const name of Object.keys(manifest.dependencies)) {
    const link = join(project, "node_modules", name);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(realpathSync(join(ROOT, "node_modules", name)), link);
    const dep = JSON.parse(readFileSync(join(link, "package.json"), "utf8")) as {
      bin?: string | Record<string, string>;
    };
    if (typeof dep.bin === "string") linkBins(name, { [name]: dep.bin });
    else if (dep.bin) linkBins(name, dep.bin);
  }
}, 60_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A command of the project's node_modules/.bin, as `npx` runs it; `--no`: never fetched from the registry. */
function npx(args: string[]) {
  return run("npx", ["--no", "--", ...args], { cwd: project, env: { ...process.env, NO_COLOR: "1" } });
}

describe("the packed package in a fresh npm init -y project", { timeout: 60_000 }, () => {
  it("runs README's Use program as written: the run succeeds with the review's output", async () => {
    writeFileSync(join(project, "main.mts"), readmeProgram(readFileSync(join(ROOT, "README.md"), "utf8")));
    const { stdout } = await npx(["tsx", "main.mts"]);
    expect(stdout).toMatch(/^\d+ review\.requested review$/m);
    expect(stdout).toMatch(/^SUCCEEDED \{\s+review: \{ decision: 'approve', by: 'ops'/m);
  });

  it("runs the content-publish example it ships with skein run: its agents import skein by name", async () => {
    const example = join("node_modules", "skein", "examples", "content-publish");
    const { stdout } = await npx([
      "skein",
      "run",
      join(example, "workflow.json"),
      "--agents",
      join(example, "agents.ts"),
      "--input",
      '{"topic":"durable agents"}',
      "--db",
      "sqlite:./demo.db",
    ]);
    expect(stdout).toMatch(/node\.retrying +fetch_b#1 attempt 1 failed: 502 Bad Gateway/);
    expect(stdout).toMatch(/^run \S+ {2}content-publish v1 {2}SUCCEEDED {2}in /m);
  });
});
