/**
 * Screenshots of the admin page for the README: `npm run screenshots` (builds first) writes
 * docs/runs.png, docs/run-graph.png, docs/inbox.png, docs/run-dark.png (the run page in the dark
 * theme), docs/run-phone.png (the run page 390 px wide), and the operating actions:
 * docs/run-paused.png, docs/run-fork.png and docs/upgrade-runs.png. It serves the two examples
 * (content-publish and order-approval, with their agents) from a temporary SQLite file, makes a
 * few runs of each (two orders left waiting for approval, one rejected and compensated), and
 * photographs the page in Debian's chromium. It also prints how long the page took to show the
 * runs list from a cold load.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import contentAgents from "../examples/content-publish/agents.js";
import orderAgents from "../examples/order-approval/agents.js";
import { createServer } from "../src/http/server.js";
import type { WorkflowInput } from "../src/index.js";
import { createEngine } from "../src/index.js";
import { launchChromium } from "./chromium.js";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
const DOCS = join(ROOT, "docs");
// Checked by registerWorkflow like any document.
const workflow = (name: string): WorkflowInput =>
  JSON.parse(readFileSync(join(ROOT, "examples", name, "workflow.json"), "utf8"));

const dir = mkdtempSync(join(tmpdir(), "skein-screenshots-"));
const engine = await createEngine({
  database: `sqlite:${join(dir, "screens.db")}`,
  agents: { ...contentAgents, ...orderAgents },
});
const app = await createServer({ engine });
try {
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  await engine.registerWorkflow(workflow("content-publish"));
  await engine.registerWorkflow(workflow("order-approval"));

  const orders = [
    { order_id: "A-1001", sku: "lamp-blue", quantity: 2, amount: 59.8 },
    { order_id: "A-1002", sku: "desk-oak", quantity: 1, amount: 349 },
    { order_id: "A-1003", sku: "chair-grey", quantity: 4, amount: 516 },
  ];
  let requested = 0;
  const reviewsRequested = new Promise<void>((done) => {
    const stop = engine.subscribe((event) => {
      if (event.type === "review.requested" && ++requested === orders.length) {
        stop();
        done();
      }
    });
  });
  const published = [];
  for (const topic of ["durable agents", "workflow engines"]) {
    published.push(await engine.startRun("content-publish", { input: { topic } }));
  }
  const ordered = [];
  for (const input of orders) ordered.push(await engine.startRun("order-approval", { input }));
  await Promise.all(published.map((run) => engine.waitForRun(run.run_id)));
  await reviewsRequested;
  const rejected = ordered[2]?.run_id as string;
  await engine.review(rejected, "approval", { decision: "reject", by: "finance", comment: "The card was flagged" });
  await engine.waitForRun(rejected);

  const browser = await launchChromium();
  try {
    // Each shot's viewport fits what it shows.
    const page = await browser.newPage({ viewport: { width: 1360, height: 420 } });
    mkdirSync(DOCS, { recursive: true });

    await page.goto(`${url}/#/runs`);
    await page
      .locator("table.runs tbody tr")
      .nth(orders.length + published.length - 1)
      .waitFor();
    const loadedMs = await page.evaluate(() => Math.round(performance.now()));
    await page.screenshot({ path: join(DOCS, "runs.png") });

    const graphRun = published[0]?.run_id as string;
    await page.goto(`${url}/#/runs/${graphRun}?node=review`);
    await page.locator('g.node[data-node-id="summary"][data-state="SUCCEEDED"]').waitFor();
    await page
      .getByRole("article", { name: "node review" })
      .getByRole("cell", { name: "node.succeeded" })
      .first()
      .waitFor();
    await page.setViewportSize({ width: 1360, height: 1080 });
    await page.screenshot({ path: join(DOCS, "run-graph.png") });

    // The theme toggle's choice, as a user would make it (theme.tsx keeps it in localStorage).
    await page.getByLabel("Theme").selectOption("dark");
    await page.waitForFunction(() => document.documentElement.dataset.theme === "dark");
    await page.screenshot({ path: join(DOCS, "run-dark.png") });
    await page.getByLabel("Theme").selectOption("light");

    await page.setViewportSize({ width: 390, height: 1400 });
    await page.getByRole("article", { name: "node review" }).waitFor();
    await page.screenshot({ path: join(DOCS, "run-phone.png") });

    await page.setViewportSize({ width: 1360, height: 860 });
    await page.goto(`${url}/#/inbox`);
    await page.locator("article.review").nth(1).waitFor();
    await page.screenshot({ path: join(DOCS, "inbox.png") });

    // Operating runs (DESIGN §16): a paused run, a fork from a node, and moving runs to a new version.
    const paused = ordered[0]?.run_id as string;
    await engine.pauseRun(paused, { by: "ops", reason: "card processor outage: holding the orders" });
    await page.setViewportSize({ width: 1360, height: 760 });
    await page.goto(`${url}/#/runs/${paused}?node=approval`);
    await page.getByRole("status").filter({ hasText: "Paused by ops" }).waitFor();
    await page.getByRole("button", { name: "Resume run…" }).waitFor();
    await page.screenshot({ path: join(DOCS, "run-paused.png") });

    await page.goto(`${url}/#/runs/${graphRun}?node=publish_a`);
    await page.getByRole("button", { name: "Fork from here…" }).click();
    await page.getByRole("dialog", { name: "Fork from publish_a?" }).waitFor();
    await page.screenshot({ path: join(DOCS, "run-fork.png") });

    // Version 2 sends a receipt after shipping: the orders waiting for approval can move to it.
    const v1 = workflow("order-approval");
    await engine.registerWorkflow({
      ...v1,
      nodes: [...v1.nodes, { node_id: "receipt", agent_type: "shipping", depends_on: ["ship"], payload: {} }],
    });
    await page.goto(`${url}/#/workflows/order-approval?version=2`);
    await page.getByText("Upgrade runs").click();
    await page.getByRole("button", { name: "Check runs" }).click();
    await page.getByRole("region", { name: "upgrade" }).getByRole("status").waitFor();
    // The panel itself: it sits below the run form.
    await page.locator("details", { hasText: "Upgrade runs" }).screenshot({ path: join(DOCS, "upgrade-runs.png") });

    console.log(
      `wrote docs/runs.png, docs/run-graph.png, docs/inbox.png, docs/run-dark.png, docs/run-phone.png, docs/run-paused.png, docs/run-fork.png, docs/upgrade-runs.png (runs list shown ${loadedMs} ms after a cold load)`,
    );
  } finally {
    await browser.close();
  }
} finally {
  await app.close();
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
}
