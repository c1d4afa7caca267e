/**
 * The admin page (src/web, built by Vite into dist/web) at `/`. Its files are read once when the
 * server starts and served from memory at their own paths: no request path ever reaches the file
 * system. The page talks to the API like any client (bearer tokens, /v1 only), so these routes
 * are public: they hold code, never data.
 *
 * Every response carries a Content-Security-Policy that runs only this origin's script files
 * (no inline script, no eval), and Trusted Types with no policy, so the browser itself refuses
 * any string assigned to an HTML sink such as innerHTML: user data can only become text.
 */
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { extname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, FastifyReply } from "fastify";
import { PUBLIC } from "./auth.js";
import { errorBody } from "./errors.js";

export const UI_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join("; ");

/** Where `npm run build` puts the page: `dist/web` of this package, from src/http or dist/http alike. */
export const BUILT_UI_DIR = fileURLToPath(new URL("../../dist/web/", import.meta.url));

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8",
};

interface UiFile {
  body: Buffer;
  type: string;
  etag: string;
  /** Vite names files under assets/ by their content hash: they never change, so caches keep them. */
  immutable: boolean;
}

/** Serves the built page in `dir` at `/`; without a build, `/` says how to make one. */
export function registerUiRoutes(app: FastifyInstance, dir: string): void {
  const files = readUi(dir);
  const index = files.get("index.html");
  if (!index) {
    app.get("/", { config: { access: PUBLIC } }, async (_request, reply) =>
      reply
        .code(404)
        .send(errorBody("not_found", `the admin page is not built (no ${join(dir, "index.html")}): run npm run build`)),
    );
    return;
  }
  app.get("/", { config: { access: PUBLIC } }, async (request, reply) =>
    send(reply, index, request.headers["if-none-match"]),
  );
  for (const [path, file] of files) {
    app.get(`/${path}`, { config: { access: PUBLIC } }, async (request, reply) =>
      send(reply, file, request.headers["if-none-match"]),
    );
  }
}

function send(reply: FastifyReply, file: UiFile, ifNoneMatch: string | undefined): FastifyReply {
  void reply
    .header("content-security-policy", UI_CSP)
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer")
    .header("cache-control", file.immutable ? "public, max-age=31536000, immutable" : "no-cache")
    .header("etag", file.etag);
  if (ifNoneMatch === file.etag) return reply.code(304).send();
  return reply.type(file.type).send(file.body);
}

/** Every file under `dir` by its URL path (`assets/index-1a2b.js`); none when `dir` does not exist. */
function readUi(dir: string): Map<string, UiFile> {
  const files = new Map<string, UiFile>();
  if (!existsSync(dir)) return files;
  const walk = (folder: string) => {
    for (const name of readdirSync(folder)) {
      const full = join(folder, name);
      if (statSync(full).isDirectory()) {
        walk(full);
        continue;
      }
      const path = relative(dir, full).split(sep).join("/");
      const body = readFileSync(full);
      files.set(path, {
        body,
        type: TYPES[extname(name)] ?? "application/octet-stream",
        etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`,
        immutable: path.startsWith("assets/"),
      });
    }
  };
  walk(dir);
  return files;
}
