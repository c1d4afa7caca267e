/**
 * The admin page's load time (http section, `ui_load_ms`; issue 7: under 1 s on localhost).
 * `skein serve`'s API and page (the build in dist/web: `npm run bench` builds it first) over a
 * fresh SQLite file holding 50 finished runs of DAG8, in this process; Debian's chromium
 * (SKEIN_CHROMIUM, default /usr/bin/chromium) headless, driven by playwright-core.
 *
 * A sample is one cold load: a new browser context (empty cache and storage) opens `/#/runs`,
 * and the time is the page's own clock (performance.now(), from the start of navigation) when
 * the runs list shows its 50 rows: the HTML, script and style fetched and run, the API read, the
 * table drawn. One warm-up, then 10 samples; the median (p50) and the worst.
 */
import type { Browser, Page } from "playwright-core";
import { CHROMIUM, launchChromium } from "../scripts/chromium.js";
import { createServer } from "../src/http/server.js";
import { createEngine } from "../src/index.js";
import { type Measured, percentile, progress, tempDb } from "./lib.js";
import { DAG8, DAG8_AGENTS, graphWorkflow } from "./workloads.js";

const RUNS = 50;
const SAMPLES = 10;

export async function benchUiLoad(): Promise<Measured> {
  const db = tempDb("ui");
  const engine = await createEngine({ database: db.url, agents: DAG8_AGENTS });
  try {
    await engine.registerWorkflow(DAG8);
    const runs = await Promise.all(Array.from({ length: RUNS }, () => engine.startRun(DAG8.id)));
    await Promise.all(runs.map((r) => engine.waitForRun(r.run_id)));
    const app = await createServer({ engine });
    try {
      const url = await app.listen({ host: "127.0.0.1", port: 0 });
      const browser = await launchChromium();
      try {
        const samples = await coldLoads(browser, SAMPLES, async (page) => {
          await page.goto(`${url}/#/runs`);
          await page
            .locator("table.runs tbody tr")
            .nth(RUNS - 1)
            .waitFor({ timeout: 10_000 });
          return page.evaluate(() => performance.now());
        });
        progress(`ui: the runs list shown ${SAMPLES} times from a cold load`);
        return {
          metrics: { ui_load_ms: percentile(samples, 50) },
          meta: { ui_load: { runs_listed: RUNS, samples: SAMPLES, worst_ms: Math.max(...samples), browser: CHROMIUM } },
        };
      } finally {
        await browser.close();
      }
    } finally {
      await app.close();
    }
  } finally {
    await engine.close();
    db.cleanup();
  }
}

const GRAPH_NODES = 1000;
const GRAPH_SAMPLES = 5;

export async function benchUiGraph(): Promise<Measured> {
  const db = tempDb("ui-graph");
  const engine = await createEngine({ database: db.url });
  try {
    const workflow = graphWorkflow("bench-graph1000", GRAPH_NODES);
    await engine.registerWorkflow(workflow);
    const app = await createServer({ engine });
    try {
      const url = await app.listen({ host: "127.0.0.1", port: 0 });
      const browser = await launchChromium();
      try {
        const samples = await coldLoads(browser, GRAPH_SAMPLES, async (page) => {
          await page.goto(`${url}/#/workflows/${workflow.id}`, { waitUntil: "commit" });
          // Checked in the page on every frame, so the time is that of the first frame with all
          // the nodes, not that of a later round trip from this process.
          const shownMs = await page.evaluate(
            `new Promise((resolve) => {
              const check = () =>
                document.querySelectorAll("svg.graph g.node").length === ${GRAPH_NODES}
                  ? resolve(performance.now())
                  : requestAnimationFrame(check);
              check();
            })`,
          );
          return Number(shownMs);
        });
        progress(`ui: the ${GRAPH_NODES}-node graph drawn ${GRAPH_SAMPLES} times from a cold load`);
        return {
          metrics: { ui_graph1000_ms: percentile(samples, 50) },
          meta: {
            ui_graph1000: {
              nodes: GRAPH_NODES,
              samples: GRAPH_SAMPLES,
              worst_ms: Math.max(...samples),
              browser: CHROMIUM,
            },
          },
        };
      } finally {
        await browser.close();
      }
    } finally {
      await app.close();
    }
  } finally {
    await engine.close();
    db.cleanup();
  }
}

/**
 * `samples` cold loads, each in a new browser context (empty cache and storage), after one
 * warm-up: `load` opens the page and answers the page's clock when it showed what is measured.
 */
async function coldLoads(browser: Browser, samples: number, load: (page: Page) => Promise<number>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i <= samples; i++) {
    const context = await browser.newContext();
    const shownMs = await load(await context.newPage());
    await context.close();
    if (i > 0) times.push(shownMs); // the first load warms the server, not the browser's cache
  }
  return times;
}
