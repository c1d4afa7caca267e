/**
 * skein/react in a real browser: the small page of test/react/page built by vite (React JSX,
 * skein/client and skein/react from src) into a temporary directory, served with /v1 sent on to
 * a real `skein serve` (the built CLI, a temporary SQLite file) by one node:http server, so the
 * page and the API share an origin. Debian's chromium, driven by playwright-core; waits are on
 * the page's DOM, never on the clock. A script error on the page fails the test.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { extname, join, normalize } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { build } from "vite";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { launchChromium } from "../../scripts/chromium.js";
import { AGENTS, ROOT, requireBuiltCli, Skein, workspace } from "../cli/helpers.js";
import { fetchApi } from "../helpers.js";
import { TOKEN_LIST, TOKENS } from "../http/helpers.js";

export { TOKENS };

/** Bound on any one wait for the page: generous, as the machine may be busy with other tests. */
const WAIT_MS = 20_000;

requireBuiltCli();

let browser: Browser | null = null;
let pageDir = "";
beforeAll(async () => {
  pageDir = mkdtempSync(join(tmpdir(), "skein-react-page-"));
  await build({
    configFile: false,
    root: join(ROOT, "test/react/page"),
    logLevel: "warn",
    resolve: {
      alias: {
        "skein/client": join(ROOT, "src/client/index.ts"),
        "skein/react": join(ROOT, "src/react/index.ts"),
      },
    },
    build: { outDir: pageDir, emptyOutDir: true, target: "es2022", reportCompressedSize: false },
  });
  browser = await launchChromium();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  rmSync(pageDir, { recursive: true, force: true });
});

const open: { context: BrowserContext; server: Server; problems: string[] }[] = [];
afterEach(async () => {
  const served = open.splice(0);
  await Promise.all(served.map((s) => s.context.close()));
  for (const s of served) s.server.closeAllConnections();
  await Promise.all(served.map((s) => new Promise((resolve) => s.server.close(resolve))));
  expect(served.flatMap((s) => s.problems)).toEqual([]);
});

const TYPES: Record<string, string> = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css" };

export interface ReactPage {
  /** The page's origin (the test's server), e.g. http://127.0.0.1:40123 */
  url: string;
  page: Page;
  /** Calls the API as a script would (admin token unless another is given). @throws on a non-2xx answer */
  api<T = unknown>(method: string, path: string, body?: unknown, token?: string): Promise<T>;
  /** Opens the page on a run, signed in with the admin token. */
  openRun(runId: string): Promise<void>;
  /** Destroys every connection of the page's server (its event stream's among them), as a network drop would. */
  dropConnections(): void;
  /** Resolves once the page has opened its `n`th event stream (counted since the start). */
  streamOpened(n: number): Promise<void>;
}

/** Starts `skein serve` and the page's server in front of it, and opens a fresh browser page. */
export async function servePage(): Promise<ReactPage> {
  const ws = workspace();
  const skein = new Skein(["serve", "--port", "0", "--agents", AGENTS, "--db", ws.db], ws.dir, {
    SKEIN_TOKENS: JSON.stringify(TOKEN_LIST),
  });
  const [, apiUrl] = await skein.waitFor(/serving the HTTP API on (http:\/\/\S+)\/v1/, undefined, "stderr");
  const api = new URL(apiUrl as string);

  let streams = 0;
  const streamWaiters: { n: number; resolve: () => void }[] = [];
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (path.startsWith("/v1/")) {
      // Sent on as it comes, both ways: an event stream flows through unbuffered.
      const upstream = request(
        {
          host: api.hostname,
          port: api.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: api.host },
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          if (path === "/v1/stream" && answer.statusCode === 200) {
            // The server subscribed before it answered: from now on the page hears what happens.
            streams++;
            for (const w of streamWaiters.filter((w) => w.n <= streams)) w.resolve();
          }
          answer.pipe(res);
        },
      );
      upstream.on("error", () => res.destroy());
      res.on("close", () => upstream.destroy());
      req.pipe(upstream);
      return;
    }
    const file = normalize(join(pageDir, path === "/" ? "index.html" : path));
    if (!file.startsWith(pageDir)) return void res.writeHead(404).end();
    try {
      const body = readFileSync(file);
      res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  if (!browser) throw new Error("the browser did not start");
  const context = await browser.newContext();
  const problems: string[] = [];
  open.push({ context, server, problems });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
      problems.push(`console error: ${message.text()}`);
    }
  });

  const call = async <T>(method: string, path: string, body?: unknown, token: string = TOKENS.admin): Promise<T> => {
    const res = await fetchApi(`${apiUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      resend: method !== "POST" || /^\/v1\/tasks\/[^/]+\/(complete|fail|heartbeat|progress)$/.test(path),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  };

  const openRun = async (runId: string) => {
    await page.goto(`${url}/?run=${encodeURIComponent(runId)}&token=${encodeURIComponent(TOKENS.admin)}`);
  };
  const streamOpened = (n: number) =>
    n <= streams ? Promise.resolve() : new Promise<void>((resolve) => streamWaiters.push({ n, resolve }));
  return { url, page, api: call, openRun, dropConnections: () => server.closeAllConnections(), streamOpened };
}

/** A claimed task of the external `writer` agent, and the calls its worker makes. */
export async function claimWriter(p: ReactPage) {
  const { tasks } = await p.api<{
    tasks: { execution_id: string; attempt: number; run_id: string; node_id: string }[];
  }>("POST", "/v1/tasks/claim", { agent_types: ["writer"], worker_id: "react-test", wait_seconds: 15 }, TOKENS.agent);
  const task = tasks[0];
  if (!task) throw new Error("no writer task became ready within 15 s");
  const report = (what: string, body: Record<string, unknown>) =>
    p.api<{ delivered?: boolean }>(
      "POST",
      `/v1/tasks/${task.execution_id}/${what}`,
      { attempt: task.attempt, worker_id: "react-test", ...body },
      TOKENS.agent,
    );
  return {
    task,
    progress: (progress: unknown) => report("progress", { progress }),
    complete: (output: unknown) => report("complete", { output }),
  };
}
