/** The admin page's files at `/`: served from a build directory with a strict CSP, public, never a path into the disk. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { testApi } from "./helpers.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A build directory like Vite's: index.html and a hashed script under assets/. */
function fakeBuild(): string {
  const dir = mkdtempSync(join(tmpdir(), "skein-ui-"));
  dirs.push(dir);
  mkdirSync(join(dir, "assets"));
  writeFileSync(join(dir, "index.html"), '<!doctype html><script type="module" src="/assets/index-abc.js"></script>');
  writeFileSync(join(dir, "assets", "index-abc.js"), "console.log('page')");
  writeFileSync(join(dir, "favicon.svg"), "<svg xmlns='http://www.w3.org/2000/svg'/>");
  return dir;
}

describe("the admin page's files", () => {
  it("serves index.html at / with a CSP that allows only this origin's script files, without a token", async () => {
    const { app } = await testApi({ server: { ui: fakeBuild() } });
    const res = await app.inject({ url: "/" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(res.body).toContain("/assets/index-abc.js");
    const csp = String(res.headers["content-security-policy"]);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("require-trusted-types-for 'script'");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).not.toContain("unsafe-eval");
    expect(res.headers["x-content-type-options"]).toBe("nosniff");
    expect(res.headers["cache-control"]).toBe("no-cache");
    // The API itself still wants a token.
    expect((await app.inject({ url: "/v1/runs" })).statusCode).toBe(401);
  });

  it("serves hashed assets as immutable, answers 304 to a matching ETag, and 404 to other paths", async () => {
    const { app } = await testApi({ server: { ui: fakeBuild() } });
    const js = await app.inject({ url: "/assets/index-abc.js" });
    expect(js.statusCode).toBe(200);
    expect(js.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(js.headers["cache-control"]).toContain("immutable");
    expect(js.headers["content-security-policy"]).toBeDefined();
    const again = await app.inject({
      url: "/assets/index-abc.js",
      headers: { "if-none-match": String(js.headers.etag) },
    });
    expect(again.statusCode).toBe(304);
    expect((await app.inject({ url: "/favicon.svg" })).headers["content-type"]).toBe("image/svg+xml");

    for (const url of [
      "/assets/other.js",
      "/assets/..%2f..%2fpackage.json",
      "/%2e%2e/package.json",
      "/../../etc/passwd",
    ]) {
      const res = await app.inject({ url });
      expect(res.statusCode, url).toBe(404);
      expect(res.json().error.code, url).toBe("not_found");
    }
  });

  it("without a build, / says how to make one; the API works the same", async () => {
    const { app } = await testApi({ open: true, server: { ui: join(tmpdir(), "skein-no-such-build") } });
    const res = await app.inject({ url: "/" });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.message).toContain("npm run build");
    expect((await app.inject({ url: "/v1/runs" })).statusCode).toBe(200);
  });

  it("is not part of the OpenAPI document", async () => {
    const { app } = await testApi({ server: { ui: fakeBuild() } });
    const doc = (await app.inject({ url: "/v1/openapi.json" })).json() as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).every((path) => path.startsWith("/v1/"))).toBe(true);
  });
});
