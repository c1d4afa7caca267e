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
import { createEngine, type Engine } from "../src/index.js";
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
    return await served(engine, async (url, browser) => {
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
    });
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
    return await served(engine, async (url, browser) => {
      const samples = await coldLoads(browser, GRAPH_SAMPLES, async (page) => {
        await page.goto(`${url}/#/workflows/${workflow.id}`, { waitUntil: "commit" });
        return firstFrameWith(page, "svg.graph g.node", GRAPH_NODES);
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
    });
  } finally {
    await engine.close();
    db.cleanup();
  }
}

/** Visits of each of the loop's two nodes: 1,000 in all, about 4,000 events. */
const LOOP_VISITS = 500;

/** A draft critiqued and revised until the critic passes it, which it never does: the loop runs out of visits. */
const LONG_LOOP = {
  id: "bench-long-loop",
  nodes: [
    { node_id: "draft", agent_type: "writer" },
    {
      node_id: "critique",
      agent_type: "critic",
      depends_on: ["draft"],
      max_visits: LOOP_VISITS,
      next_on_success: [{ when: "output.score >= 0.8", to: "publish" }, { to: "revise" }],
    },
    { node_id: "revise", agent_type: "writer", max_visits: LOOP_VISITS, next_on_success: "critique" },
    { node_id: "publish", agent_type: "writer" },
  ],
};

/**
 * ui_run1000_ms: a cold load of the run page of a loop that made 1,000 visits (an agent that
 * iterated for a long time), until the timeline shows a row for each of them: the run, its
 * events and the workflow fetched, the graph, the timeline and the history drawn.
 */
export async function benchUiLongRun(): Promise<Measured> {
  const db = tempDb("ui-long-run");
  const engine = await createEngine({
    database: db.url,
    agents: { writer: async () => ({ text: "a draft" }), critic: async () => ({ score: 0.1 }) },
  });
  try {
    await engine.registerWorkflow(LONG_LOOP);
    const run = await engine.waitForRun((await engine.startRun(LONG_LOOP.id)).run_id);
    const events = (await engine.listEvents(run.run_id, { limit: 100_000 })).length;
    return await served(engine, async (url, browser) => {
      const samples = await coldLoads(browser, GRAPH_SAMPLES, async (page) => {
        await page.goto(`${url}/#/runs/${run.run_id}`, { waitUntil: "commit" });
        return firstFrameWith(page, "svg.timeline g.timeline-row", 2 * LOOP_VISITS);
      });
      progress(`ui: the page of a run of ${2 * LOOP_VISITS} visits drawn ${GRAPH_SAMPLES} times from a cold load`);
      return {
        metrics: { ui_run1000_ms: percentile(samples, 50) },
        meta: {
          ui_run1000: {
            visits: 2 * LOOP_VISITS,
            events,
            samples: GRAPH_SAMPLES,
            worst_ms: Math.max(...samples),
            browser: CHROMIUM,
          },
        },
      };
    });
  } finally {
    await engine.close();
    db.cleanup();
  }
}

/**
 * The page's clock at the first frame with at least `count` elements matching `selector`:
 * checked in the page on every frame, so the time is that of the frame, not that of a later round
 * trip from this process (waitForFunction's polling added seconds on a loaded machine).
 */
async function firstFrameWith(page: Page, selector: string, count: number): Promise<number> {
  const shownMs = await page.evaluate(
    `new Promise((resolve) => {
      const check = () =>
        document.querySelectorAll(${JSON.stringify(selector)}).length >= ${count}
          ? resolve(performance.now())
          : requestAnimationFrame(check);
      check();
    })`,
  );
  return Number(shownMs);
}

/** `measure` with the engine served over HTTP on a free port and Debian's chromium open; both closed after. */
async function served<T>(engine: Engine, measure: (url: string, browser: Browser) => Promise<T>): Promise<T> {
  const app = await createServer({ engine });
  try {
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    const browser = await launchChromium();
    try {
      return await measure(url, browser);
    } finally {
      await browser.close();
    }
  } finally {
    await app.close();
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
