/**
 * Every relative link and #anchor in README.md and docs/*.md resolves in the repository, and every
 * Markdown file the npm package ships links only to files the package ships (what `npm pack`
 * would put in the tarball, listed with `npm pack --dry-run --json`: nothing is built or written).
 * Links with a scheme (https:, mailto:) are not fetched.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { readMarkdown } from "./markdown.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** Repository-relative paths of README.md and docs' pages. */
function docsFiles(): string[] {
  const docs = readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`);
  return ["README.md", ...docs];
}

interface Broken {
  where: string;
  href: string;
  why: string;
}

/**
 * The broken links of `files` (repository-relative): a target missing from `exists`, or an anchor
 * that is no heading of its Markdown file.
 */
function brokenLinks(files: string[], exists: (path: string) => boolean, root = ROOT): Broken[] {
  const broken: Broken[] = [];
  const anchorsOf = new Map<string, Set<string>>();
  const anchors = (file: string) => {
    let set = anchorsOf.get(file);
    if (!set) {
      set = readMarkdown(join(root, file)).anchors;
      anchorsOf.set(file, set);
    }
    return set;
  };
  for (const file of files) {
    for (const link of readMarkdown(join(root, file)).links) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link.href) || link.href.startsWith("//")) continue;
      const where = `${file}:${link.line}`;
      const [rawPath = "", anchor] = link.href.split("#", 2);
      const path = decodeURIComponent(rawPath);
      const target = path === "" ? file : normalize(join(dirname(file), path)).replace(/\/$/, "");
      if (target.startsWith("..")) {
        broken.push({ where, href: link.href, why: "points outside the repository" });
        continue;
      }
      if (!exists(target)) {
        broken.push({ where, href: link.href, why: `${target} does not exist` });
        continue;
      }
      if (anchor !== undefined && target.endsWith(".md") && !anchors(target).has(anchor)) {
        broken.push({ where, href: link.href, why: `no heading in ${target} has the anchor #${anchor}` });
      }
    }
  }
  return broken;
}

/** Fails with every broken link, one a line (thrown: an assertion's message would be cut short). */
function expectNone(broken: Broken[]): void {
  if (broken.length > 0) {
    throw new Error(
      `${broken.length} broken links:\n${broken.map((b) => `${b.where}: (${b.href}) ${b.why}`).join("\n")}`,
    );
  }
}

describe("links in README.md and docs/", () => {
  it("resolve in the repository", () => {
    const broken = brokenLinks(docsFiles(), (path) => existsSync(join(ROOT, path)));
    expectNone(broken);
  });

  it("resolve in the npm package, for every Markdown file it ships", { timeout: 60_000 }, () => {
    const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
      cwd: ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    const [pack] = JSON.parse(out) as { files: { path: string }[] }[];
    const shipped = new Set((pack?.files ?? []).map((f) => f.path));
    // A folder is shipped when a file under it is.
    const folders = new Set<string>();
    for (const path of shipped) {
      for (let d = dirname(path); d !== "."; d = dirname(d)) folders.add(d);
    }
    const markdown = [...shipped].filter((p) => p.endsWith(".md"));
    expect(markdown).toContain("README.md");
    for (const file of docsFiles()) expect(shipped, `${file} is not in the package`).toContain(file);
    const broken = brokenLinks(markdown, (path) => shipped.has(path) || folders.has(path));
    expectNone(broken);
  });
});

// The checker itself finds what is broken, and only that.
describe("the link checker", () => {
  it("finds a missing file, a missing anchor and a link out of the repository", () => {
    const dir = mkdtempSync(join(tmpdir(), "skein-links-"));
    try {
      mkdirSync(join(dir, "docs"));
      writeFileSync(join(dir, "docs", "a.md"), "# A page\n\n## The `skein` command\n");
      writeFileSync(
        join(dir, "README.md"),
        [
          "# Title",
          "[ok](docs/a.md#the-skein-command) [ok too](#title) [web](https://example.com/x) `[code](nope.md)`",
          "[gone](docs/b.md) [no anchor](docs/a.md#missing) [outside](../x.md)",
          "",
        ].join("\n"),
      );
      const broken = brokenLinks(["README.md", "docs/a.md"], (path) => existsSync(join(dir, path)), dir);
      expect(broken.map((b) => `${b.where} ${b.href}`)).toEqual([
        "README.md:3 docs/b.md",
        "README.md:3 docs/a.md#missing",
        "README.md:3 ../x.md",
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
