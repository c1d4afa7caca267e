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
 * `ui_graph1000_ms` and `ui_run1000_ms` are cold loads the same way, 5 samples: a 1,000-node
 * workflow's graph, and the page of a loop's run of 1,000 visits, each timed at its first frame.
 */
import type { Browser, Page } from "playwright-core";
import { CHROMIUM, launchChromium } from "../scripts/chromium.js";
import { createServer } from "../src/http/server.js";
import { type AgentHandler, createEngine, type Engine } from "../src/index.js";
import { type Measured, percentile, progress, tempDb } from "./lib.js";
import { DAG8, DAG8_AGENTS, graphWorkflow, LONG_LOOP, LONG_LOOP_AGENTS, LONG_LOOP_VISITS } from "./workloads.js";

const RUNS = 50;
const SAMPLES = 10;

export async function benchUiLoad(): Promise<Measured> {
  return served("ui", DAG8_AGENTS, async (engine, url, browser) => {
    await engine.registerWorkflow(DAG8);
    const runs = await Promise.all(Array.from({ length: RUNS }, () => engine.startRun(DAG8.id)));
    await Promise.all(runs.map((r) => engine.waitForRun(r.run_id)));
    const samples = await coldLoads(browser, SAMPLES, async (page) => {
      await page.goto(`${url}/#/runs`);
      await page
        .locator("table.runs tbody tr")
        .nth(RUNS - 1)
        .waitFor({ timeout: 10_000 });
      return page.evaluate(() => performance.now());
    });
    progress(`ui: the runs list shown ${SAMPLES} times from a cold load`);
    return coldLoadFigures("ui_load", samples, { runs_listed: RUNS });
  });
}

const GRAPH_NODES = 1000;
const GRAPH_SAMPLES = 5;

export async function benchUiGraph(): Promise<Measured> {
  return served("ui-graph", {}, async (engine, url, browser) => {
    const workflow = graphWorkflow("bench-graph1000", GRAPH_NODES);
    await engine.registerWorkflow(workflow);
    const samples = await coldLoads(browser, GRAPH_SAMPLES, async (page) => {
      await page.goto(`${url}/#/workflows/${workflow.id}`, { waitUntil: "commit" });
      return firstFrameWith(page, "svg.graph g.node", GRAPH_NODES);
    });
    progress(`ui: the ${GRAPH_NODES}-node graph drawn ${GRAPH_SAMPLES} times from a cold load`);
    return coldLoadFigures("ui_graph1000", samples, { nodes: GRAPH_NODES });
  });
}

/**
 * ui_run1000_ms: a cold load of the run page of a loop that made 1,000 visits (an agent that
 * iterated for a long time), until the timeline shows a row for each of them: the run, its
 * events and the workflow fetched, the graph, the timeline and the history drawn.
 */
export async function benchUiLongRun(): Promise<Measured> {
  return served("ui-long-run", LONG_LOOP_AGENTS, async (engine, url, browser) => {
    await engine.registerWorkflow(LONG_LOOP);
    const run = await engine.waitForRun((await engine.startRun(LONG_LOOP.id)).run_id);
    const events = (await engine.listEvents(run.run_id, { limit: 100_000 })).length;
    const samples = await coldLoads(browser, GRAPH_SAMPLES, async (page) => {
      await page.goto(`${url}/#/runs/${run.run_id}`, { waitUntil: "commit" });
      return firstFrameWith(page, "svg.timeline g.timeline-row", LONG_LOOP_VISITS);
    });
    progress(`ui: the page of a run of ${LONG_LOOP_VISITS} visits drawn ${GRAPH_SAMPLES} times from a cold load`);
    return coldLoadFigures("ui_run1000", samples, { visits: LONG_LOOP_VISITS, events });
  });
}

/** `<name>_ms`, the median of the cold loads, with `facts` about them and the worst in meta.<name>. */
function coldLoadFigures(name: string, samples: number[], facts: Record<string, number>): Measured {
  return {
    metrics: { [`${name}_ms`]: percentile(samples, 50) },
    meta: { [name]: { ...facts, samples: samples.length, worst_ms: Math.max(...samples), browser: CHROMIUM } },
  };
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

/**
 * `measure` with an engine on a fresh SQLite file (`agents` in it) served over HTTP on a free
 * port, and Debian's chromium open; all of them closed after.
 */
async function served<T>(
  name: string,
  agents: Record<string, AgentHandler>,
  measure: (engine: Engine, url: string, browser: Browser) => Promise<T>,
): Promise<T> {
  const db = tempDb(name);
  const engine = await createEngine({ database: db.url, agents });
  try {
    const app = await createServer({ engine });
    try {
      const url = await app.listen({ host: "127.0.0.1", port: 0 });
      const browser = await launchChromium();
      try {
        return await measure(engine, url, browser);
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
