/**
 * The admin page in a real browser: Debian's chromium, driven by playwright-core, against a real
 * `skein serve` (the built CLI and the built page) on a temporary SQLite file, one server per
 * test. Waits are playwright's: on DOM state (`locator.waitFor`, `page.waitForFunction`), never
 * on the clock. A test fails on any script error or CSP violation in the page.
 *
 * The workflows use test/fixtures/cli-agents.ts (`echo`, `broken`) in the server; nodes of type
 * `writer` have no handler there, so they wait for an external agent: the test plays it through
 * /v1/tasks, which lets it decide exactly when a node finishes.
 */

import axe from "axe-core";
import type { Browser, BrowserContext, Locator, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { launchChromium } from "../../scripts/chromium.js";
import { AGENTS, requireBuiltCli, Skein, workspace } from "../cli/helpers.js";
import { fetchApi } from "../helpers.js";
import { TOKEN_LIST, TOKENS } from "../http/helpers.js";

/** Bound on any one wait for the page: generous, as the machine may be busy with other tests. */
const WAIT_MS = 20_000;

export { TOKENS };

/** The content workflow: an external draft, a review only ops or alice may decide, then publish or rework. */
export const PUBLISH = {
  id: "publish",
  input_schema: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
  nodes: [
    { node_id: "draft", agent_type: "writer", payload: { topic: "{{ input.topic }}" } },
    {
      node_id: "check",
      agent_type: "human_review",
      depends_on: ["draft"],
      timeout: 3600,
      payload: {
        title: "Publish the draft about {{ input.topic }}?",
        instructions: "Read the draft, then approve to publish it or reject to send it for rework.",
        assignees: ["ops", "alice"],
        draft: "{{ nodes.draft.output }}",
      },
      next_on_success: "publish",
      next_on_failure: "rework",
    },
    { node_id: "publish", agent_type: "echo" },
    { node_id: "rework", agent_type: "echo" },
  ],
};

requireBuiltCli();

let browser: Browser | null = null;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

const contexts: { context: BrowserContext; problems: string[] }[] = [];
afterEach(async () => {
  const open = contexts.splice(0);
  await Promise.all(open.map((c) => c.context.close()));
  // Script errors and CSP refusals are bugs even when the page looked right.
  expect(open.flatMap((c) => c.problems)).toEqual([]);
});

export interface Served {
  /** The server's base URL, e.g. http://127.0.0.1:40123 */
  url: string;
  page: Page;
  /** Every URL the page requested (to check no token ever appears in one). */
  requests: string[];
  /** Calls the API as a script would (admin token unless another is given). @throws on a non-2xx answer */
  api<T = unknown>(method: string, path: string, body?: unknown, token?: string): Promise<T>;
  /** Plays the external `writer` agent: claims the next writer task (waiting for it) and completes it. */
  completeWriterTask(output?: unknown): Promise<{ run_id: string; node_id: string }>;
}

/**
 * Starts `skein serve` (with the test tokens unless `open`, with `env` added to its environment,
 * e.g. SKEIN_LLM_BASE_URL) and opens a fresh browser page on it.
 */
export async function serve(options: { open?: boolean; env?: NodeJS.ProcessEnv } = {}): Promise<Served> {
  const ws = workspace();
  const server = new Skein(["serve", "--port", "0", "--agents", AGENTS, "--db", ws.db], ws.dir, {
    ...(options.open ? {} : { SKEIN_TOKENS: JSON.stringify(TOKEN_LIST) }),
    ...options.env,
  });
  const [, url] = await server.waitFor(/serving the HTTP API on (http:\/\/\S+)\/v1/, undefined, "stderr");
  const base = url as string;

  if (!browser) throw new Error("the browser did not start");
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  const problems: string[] = [];
  contexts.push({ context, problems });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  const requests: string[] = [];
  page.on("request", (request) => requests.push(request.url()));
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    // A refused request (401 before signing in, 409 on a conflict) is logged by the browser: expected.
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
      problems.push(`console error: ${message.text()}`);
    }
  });

  const api = async <T>(method: string, path: string, body?: unknown, token: string = TOKENS.admin): Promise<T> => {
    const res = await fetchApi(`${base}${path}`, {
      method,
      headers: {
        ...(options.open ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      // A task's report is fenced by its attempt: the same one twice is answered `duplicate`.
      resend: method !== "POST" || /^\/v1\/tasks\/[^/]+\/(complete|fail|heartbeat)$/.test(path),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  };

  const completeWriterTask = async (output: unknown = { text: "A draft about durable agents" }) => {
    const { tasks } = await api<{
      tasks: { execution_id: string; attempt: number; run_id: string; node_id: string }[];
    }>("POST", "/v1/tasks/claim", { agent_types: ["writer"], worker_id: "web-test", wait_seconds: 15 }, TOKENS.agent);
    const task = tasks[0];
    if (!task) throw new Error("no writer task became ready within 15 s");
    await api(
      "POST",
      `/v1/tasks/${task.execution_id}/complete`,
      { attempt: task.attempt, worker_id: "web-test", output },
      TOKENS.agent,
    );
    return { run_id: task.run_id, node_id: task.node_id };
  };

  return { url: base, page, requests, api, completeWriterTask };
}

/** Opens the page and signs in with a token through the form. */
export async function signIn(served: Served, token: string = TOKENS.admin): Promise<void> {
  const { page } = served;
  await page.goto(`${served.url}/`);
  await page.getByLabel("Token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("navigation", { name: "pages" }).waitFor();
}

/** The graph node of `nodeId` once its visit is in `state` (waits for it). */
export async function nodeInState(page: Page, nodeId: string, state: string): Promise<Locator> {
  const node = page.locator(`svg.graph g.node[data-node-id="${nodeId}"][data-state="${state}"]`);
  await node.waitFor();
  return node;
}

/** Waits until the run page's header shows `status`. */
export async function runStatus(page: Page, status: string): Promise<void> {
  await page.locator(".run-page .page-header h2 .badge", { hasText: new RegExp(`^${status}$`) }).waitFor();
}

/** Marks the document: a reload or a navigation to another document would lose the mark. */
export async function markDocument(page: Page): Promise<void> {
  await page.evaluate(() => {
    (window as unknown as { skeinMark: number }).skeinMark = 1;
  });
}

export async function documentStillMarked(page: Page): Promise<boolean> {
  return page.evaluate(() => (window as unknown as { skeinMark?: number }).skeinMark === 1);
}

/** axe-core's rules, run in the page: what it found of impact "serious" or "critical". */
export interface AxeViolation {
  id: string;
  impact: string;
  help: string;
  targets: string[];
}

/**
 * Runs axe-core (the WCAG 2.1 A/AA rules) on the page as it is now and fails the test on any
 * violation of impact "serious" or "critical", each named with its rule and elements. axe runs
 * through the DevTools protocol (page.evaluate), which the page's CSP does not govern, so the
 * page under test keeps its real CSP and Trusted Types.
 */
export async function expectAccessible(page: Page, what = "the page"): Promise<void> {
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(context: unknown, options: unknown): Promise<AxeResults> } }).axe;
    const results = await axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21aa"] } });
    return results.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(" ")) }));
  });
  expect(violations, `axe-core's serious or critical violations on ${what}`).toEqual([]);
}

interface AxeResults {
  violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[];
}

const AXE_SOURCE: string = axe.source;

/**
 * Replaces the text of the definition editor (CodeMirror) as a user's select-all and paste would.
 * (Not playwright's fill: its native insertText has Chrome copy computed styles into style
 * attributes, which the CSP refuses; CodeMirror's own paste handling edits through its state.)
 */
export async function pasteIntoEditor(page: Page, text: string, name = "Definition (JSON)"): Promise<void> {
  const editor = page.getByRole("textbox", { name });
  await editor.click();
  await page.keyboard.press("ControlOrMeta+A");
  await editor.evaluate((el, pasted) => {
    const data = new DataTransfer();
    data.setData("text/plain", pasted);
    el.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
  }, text);
}

/** The definition editor's whole text, copied as a user's select-all and copy would. */
export async function editorText(page: Page, name = "Definition (JSON)"): Promise<string> {
  const editor = page.getByRole("textbox", { name });
  await editor.click();
  await page.keyboard.press("ControlOrMeta+A");
  return editor.evaluate((el) => {
    const data = new DataTransfer();
    el.dispatchEvent(new ClipboardEvent("copy", { clipboardData: data, bubbles: true, cancelable: true }));
    return data.getData("text/plain");
  });
}
