/**
 * What the page must never do: run markup from data (hostile node ids, payloads, conditions,
 * errors and review texts stay text), put a token in a URL, or need a token when none is set.
 */
import type { Page, Route } from "playwright-core";
import { describe, expect, it } from "vitest";
import { nodeInState, PUBLISH, pasteIntoEditor, runStatus, serve, signIn, TOKENS } from "./helpers.js";

// No double quotes: the page shows JSON values as JSON, where they would read \".
const SCRIPT = "<script>window.pwned = 'script'</script>";
const IMG = "<img src=x onerror=window.pwned=1>";
const CLICK = "click start call alert(1)";
const INIT = "%%{init: {'securityLevel': 'loose'}}%%";

/** A valid workflow with hostile strings wherever a definition and its run may carry text. */
const HOSTILE = {
  id: "hostile",
  description: SCRIPT,
  nodes: [
    {
      node_id: "start",
      agent_type: "echo",
      payload: { note: SCRIPT, diagram: `${INIT}\n${CLICK}` },
      next_on_success: [{ when: `output.node = '${CLICK}'`, to: "never" }, { to: "fail" }],
    },
    { node_id: "never", agent_type: "echo" },
    { node_id: "fail", agent_type: "broken", payload: { message: IMG } },
  ],
};

const HOSTILE_REVIEW = {
  id: "hostile-review",
  nodes: [
    {
      node_id: "ask",
      agent_type: "human_review",
      payload: { title: IMG, instructions: SCRIPT, assignees: [SCRIPT], data: `${INIT} ${CLICK}` },
    },
  ],
};

/** Nothing ran and nothing active was added: no script, image, frame or link made from data. */
async function expectInert(page: Page): Promise<void> {
  expect(await page.evaluate(() => (window as unknown as { pwned?: unknown }).pwned)).toBeUndefined();
  expect(await page.locator("main script, main img, main iframe, main object, main embed").count()).toBe(0);
  expect(await page.locator("svg a, svg foreignObject, svg script").count()).toBe(0);
}

describe("the admin page's safety", { timeout: 90_000 }, () => {
  it("shows hostile node ids, payloads, conditions, errors and review texts as inert text", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/hostile", HOSTILE);
    await s.api("PUT", "/v1/workflows/hostile-review", HOSTILE_REVIEW);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "hostile" });
    await s.api("POST", "/v1/runs", { workflow_id: "hostile-review" });
    await signIn(s);
    const { page } = s;

    // A run: the payload, the `when` label and the error message, as text.
    await page.goto(`${s.url}/#/runs/${run.run_id}?node=start`);
    await runStatus(page, "FAILED");
    await page.locator("pre.json", { hasText: SCRIPT }).waitFor();
    await page.locator("pre.json", { hasText: CLICK }).waitFor();
    await expect.poll(() => page.locator("pre.json", { hasText: INIT }).count()).toBe(1);
    const label = page.locator('g.edge[data-from="start"][data-to="never"] .edge-label title');
    expect(await label.textContent()).toBe(`output.node = '${CLICK}'`);
    await page.locator(".error-note", { hasText: IMG }).first().waitFor();
    await page.getByRole("table", { name: "nodes" }).getByRole("cell", { name: IMG }).waitFor();
    await expectInert(page);

    // The workflow's description.
    await page.goto(`${s.url}/#/workflows/hostile`);
    expect(await page.locator(".description").textContent()).toBe(SCRIPT);
    await expectInert(page);

    // A review's title, instructions, assignees and data.
    await page.goto(`${s.url}/#/inbox`);
    const card = page.locator("article.review");
    expect(await card.locator(".review-title").textContent()).toBe(IMG);
    expect(await card.locator(".instructions").textContent()).toBe(SCRIPT);
    expect(await card.locator(".assignees").textContent()).toBe(SCRIPT);
    await card.locator("pre.json", { hasText: CLICK }).waitFor();
    await expectInert(page);

    // Node ids no valid workflow may have, typed into the editor: listed as problems, drawn as text.
    await page.goto(`${s.url}/#/new-workflow`);
    await pasteIntoEditor(
      page,
      JSON.stringify({
        id: "typed",
        nodes: [
          { node_id: SCRIPT, agent_type: "echo" },
          { node_id: CLICK, agent_type: "echo", depends_on: [SCRIPT], next_on_success: [{ when: INIT, to: IMG }] },
          { node_id: IMG, agent_type: "echo" },
        ],
      }),
    );
    const validation = page.getByRole("region", { name: "validation" });
    await validation.locator("li", { hasText: "nodes[0].node_id" }).waitFor();
    const preview = page.getByRole("region", { name: "graph preview" });
    await preview.locator("g.node", { has: page.locator("title", { hasText: CLICK }) }).waitFor();
    expect(
      await preview.locator("g.node").evaluateAll((nodes) => nodes.map((n) => n.getAttribute("data-node-id"))),
    ).toEqual([SCRIPT, CLICK, IMG]);
    expect(await preview.locator(".edge-label title").allTextContents()).toEqual([INIT]);
    await expectInert(page);
  });

  it("signs in with a token kept in sessionStorage and sent as a bearer header, never in a URL", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "publish", input: { topic: "t" } });
    const { page } = s;
    const headers: { url: string; authorization: string | undefined }[] = [];
    page.on("request", (request) => {
      if (new URL(request.url()).pathname.startsWith("/v1/")) {
        headers.push({ url: request.url(), authorization: request.headers().authorization });
      }
    });

    const response = await page.goto(`${s.url}/`);
    const csp = response?.headers()["content-security-policy"] ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");

    const form = page.getByRole("form", { name: "sign in" });
    await form.getByLabel("Token").fill("not-a-token-0123456789");
    await form.getByRole("button", { name: "Sign in" }).click();
    await form.getByText("That token is not valid.").waitFor();
    await form.getByLabel("Token").fill(TOKENS.agent);
    await form.getByRole("button", { name: "Sign in" }).click();
    await form.getByText("This token may not use the admin page").waitFor();

    await form.getByLabel("Token").fill(TOKENS.alice);
    await form.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("table", { name: "runs" }).waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem("skein.token"))).toBe(TOKENS.alice);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);

    // The run page's live stream is authorized by the header too.
    await page.goto(`${s.url}/#/runs/${run.run_id}`);
    await nodeInState(page, "draft", "PENDING");
    await s.completeWriterTask();
    await nodeInState(page, "draft", "SUCCEEDED");
    const stream = headers.find((h) => h.url.includes(`/v1/stream?run_id=${run.run_id}`));
    expect(stream?.authorization).toBe(`Bearer ${TOKENS.alice}`);
    expect(headers.filter((h) => h.authorization === `Bearer ${TOKENS.alice}`).length).toBeGreaterThan(3);
    for (const token of Object.values(TOKENS)) {
      expect(s.requests.filter((url) => url.includes(token) || url.includes(encodeURIComponent(token)))).toEqual([]);
    }

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("form", { name: "sign in" }).waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem("skein.token"))).toBeNull();
  });

  it("stays signed in when a refusal of a request sent before signing in arrives after it", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/quick", { id: "quick", nodes: [{ node_id: "only", agent_type: "echo" }] });
    const { page } = s;
    // The inbox count's first request, sent without a token, is held until the user has signed in
    // (a busy server or network answers in any order).
    const held: Route[] = [];
    const arrived: Promise<unknown>[] = [];
    await page.route(
      (url) => url.pathname === "/v1/reviews",
      (route) => {
        if (route.request().headers().authorization) return route.continue();
        held.push(route);
      },
    );
    await page.goto(`${s.url}/`);
    const form = page.getByRole("form", { name: "sign in" });
    await form.getByLabel("Token").fill(TOKENS.admin);
    await form.getByRole("button", { name: "Sign in" }).click();
    const table = page.getByRole("table", { name: "runs" }).or(page.getByText("No runs yet."));
    await table.waitFor();
    expect(held.length).toBeGreaterThan(0);

    // Its 401 answers a token the page no longer has: the page stays, and still follows runs live.
    for (const route of held) {
      arrived.push(page.waitForEvent("requestfinished", (request) => request === route.request()));
      await route.continue();
    }
    await Promise.all(arrived);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "quick" });
    await page.locator(`table[aria-label="runs"] tr[data-run-id="${run.run_id}"]`).waitFor();
    expect(await form.count()).toBe(0);
  });

  it("works without signing in when the API has no tokens, deciding reviews as a name typed in", async () => {
    const s = await serve({ open: true });
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "publish", input: { topic: "t" } });
    await s.completeWriterTask();
    const { page } = s;
    await page.goto(`${s.url}/`);
    await page.locator(`tr[data-run-id="${run.run_id}"]`).waitFor();
    expect(await page.getByRole("form", { name: "sign in" }).count()).toBe(0);
    expect(await page.getByRole("button", { name: "Sign out" }).count()).toBe(0);

    await page.goto(`${s.url}/#/inbox`);
    const card = page.locator(`article.review[data-run-id="${run.run_id}"]`);
    await card.getByLabel(/Decide as \(one of: ops, alice\)/).fill("alice");
    await card.getByRole("button", { name: "Approve" }).click();
    await page.locator("article.outcome.decided").getByText("Approved by alice").waitFor();
  });
});
