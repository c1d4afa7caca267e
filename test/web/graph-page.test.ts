/**
 * The graph as the browser draws it (ELK up to ELK_MAX_NODES nodes, the hand-written layout
 * beyond): loop-backs go around the nodes, labels keep apart, a 1,000-node workflow is drawn, and
 * a run's live updates do not lay the graph out again. Geometry is read from the SVG itself.
 */
import { readFileSync } from "node:fs";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { graphWorkflow } from "../../bench/workloads.js";
import { expectAccessible, nodeInState, PUBLISH, serve, signIn } from "./helpers.js";

const LOOP = JSON.parse(readFileSync(new URL("../../examples/loop/workflow.json", import.meta.url), "utf8")) as {
  id: string;
};

interface Drawn {
  nodes: { id: string; x: number; y: number; width: number; height: number }[];
  edges: { from: string; to: string; loop: boolean; points: { x: number; y: number }[] }[];
  labels: { text: string; x: number; y: number; width: number; height: number }[];
}

/** The drawing in SVG user units: node boxes, every edge's path sampled every 4 units, label boxes. */
function readDrawing(page: Page): Promise<Drawn> {
  return page.evaluate(() => {
    const svg = document.querySelector("svg.graph") as SVGSVGElement;
    const nodes = [...svg.querySelectorAll<SVGGElement>("g.node")].map((g) => {
      const rect = g.querySelector("rect") as SVGRectElement;
      const box = rect.getBBox();
      const m = g.transform.baseVal.consolidate()?.matrix;
      return {
        id: g.dataset.nodeId ?? "",
        x: box.x + (m?.e ?? 0),
        y: box.y + (m?.f ?? 0),
        width: box.width,
        height: box.height,
      };
    });
    const edges = [...svg.querySelectorAll<SVGGElement>("g.edge")].map((g) => {
      const path = g.querySelector("path") as SVGPathElement;
      const length = path.getTotalLength();
      const points = [];
      for (let at = 0; at <= length; at += 4) points.push(path.getPointAtLength(at));
      points.push(path.getPointAtLength(length));
      return {
        from: g.dataset.from ?? "",
        to: g.dataset.to ?? "",
        loop: g.classList.contains("loop"),
        points: points.map((p) => ({ x: p.x, y: p.y })),
      };
    });
    const labels = [...svg.querySelectorAll<SVGTextElement>("text.edge-label")].map((t) => {
      const box = t.getBBox();
      // The shown text (its <title> holds the whole label).
      const text = [...t.childNodes]
        .filter((n) => n.nodeType === Node.TEXT_NODE)
        .map((n) => n.textContent)
        .join("");
      return { text, x: box.x, y: box.y, width: box.width, height: box.height };
    });
    return { nodes, edges, labels };
  });
}

type Box = { x: number; y: number; width: number; height: number };
const inside = (p: { x: number; y: number }, b: Box, inset: number) =>
  p.x > b.x + inset && p.x < b.x + b.width - inset && p.y > b.y + inset && p.y < b.y + b.height - inset;
const overlap = (a: Box, b: Box) =>
  a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

/** Edges that pass through a node box other than their own two ends (1 unit of slack for the stroke). */
function edgesThroughNodes(drawn: Drawn): string[] {
  return drawn.edges.flatMap((e) => {
    const hit = drawn.nodes.find((n) => n.id !== e.from && n.id !== e.to && e.points.some((p) => inside(p, n, 1)));
    return hit ? [`${e.from}->${e.to} through ${hit.id}`] : [];
  });
}

async function openWorkflow(page: Page, url: string, id: string, nodes: number): Promise<void> {
  await page.goto(`${url}/#/workflows/${id}`);
  await page.waitForFunction((n) => document.querySelectorAll("svg.graph g.node").length === n, nodes, {
    timeout: 60_000,
  });
}

describe("the graph's layout in the browser", { timeout: 180_000 }, () => {
  it("draws loop-backs as lanes going back up around the nodes, and edge labels apart, on an accessible page", async () => {
    const s = await serve();
    const blocks = graphWorkflow("blocks", 120);
    await s.api("PUT", `/v1/workflows/${LOOP.id}`, LOOP);
    await s.api("PUT", "/v1/workflows/blocks", blocks);
    await signIn(s);
    const { page } = s;

    await openWorkflow(page, s.url, LOOP.id, 4);
    const loop = await readDrawing(page);
    const back = loop.edges.find((e) => e.loop);
    expect(back && `${back.from}->${back.to}`).toBe("revise->critique");
    const critique = loop.nodes.find((n) => n.id === "critique") as Box;
    const revise = loop.nodes.find((n) => n.id === "revise") as Box;
    // Drawn from revise up to critique, which sits above it.
    expect(critique.y + critique.height).toBeLessThanOrEqual(revise.y);
    const end = back?.points.at(-1) as { x: number; y: number };
    expect(Math.abs(end.y - (critique.y + critique.height)) < 2 || Math.abs(end.y - critique.y) < 2).toBe(true);
    expect(edgesThroughNodes(loop)).toEqual([]);
    expect(loop.labels.map((l) => l.text).sort()).toEqual(["ok", "ok", "output.score >= 0.8"]);
    await expectAccessible(page, "a workflow's graph");

    // 120 nodes: fan-outs, joins, 4 loop-backs, a `when`, an `ok` and a `fail` label per block.
    await openWorkflow(page, s.url, "blocks", blocks.nodes.length);
    const drawn = await readDrawing(page);
    expect(drawn.edges.filter((e) => e.loop)).toHaveLength(4);
    expect(edgesThroughNodes(drawn)).toEqual([]);
    const piled = drawn.labels.flatMap((a, i) =>
      drawn.labels.slice(i + 1).flatMap((b) => (overlap(a, b) ? [`${a.text} / ${b.text}`] : [])),
    );
    expect(drawn.labels.length).toBeGreaterThan(30);
    expect(piled).toEqual([]);
    const onNodes = drawn.labels.flatMap((l) =>
      drawn.nodes.filter((n) => overlap(l, n)).map((n) => `${l.text} on ${n.id}`),
    );
    expect(onNodes).toEqual([]);
  });

  it("draws a 1,000-node workflow", async () => {
    const s = await serve();
    const big = graphWorkflow("big", 1000);
    await s.api("PUT", "/v1/workflows/big", big);
    await signIn(s);
    await openWorkflow(s.page, s.url, "big", 1000);
    const drawn = await readDrawing(s.page);
    expect(new Set(drawn.nodes.map((n) => n.id))).toEqual(new Set(big.nodes.map((n) => n.node_id)));
    expect(drawn.edges.filter((e) => e.loop)).toHaveLength(20);
  });

  it("keeps the layout while a run's states change: no new layout on a live update", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "publish", input: { topic: "x" } });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}`);
    await nodeInState(page, "draft", "PENDING");
    // From now on, any "Laying out…" (a layout started again) or a moved node is recorded.
    await page.evaluate(() => {
      const w = window as unknown as { relaidOut: boolean; before: string };
      w.relaidOut = false;
      w.before = document.querySelector('svg.graph g.node[data-node-id="check"]')?.getAttribute("transform") ?? "";
      new MutationObserver(() => {
        if (document.querySelector(".graph-pending")) w.relaidOut = true;
      }).observe(document.body, { childList: true, subtree: true });
    });
    await s.completeWriterTask();
    await nodeInState(page, "draft", "SUCCEEDED");
    await nodeInState(page, "check", "IN_REVIEW");
    const after = await page.evaluate(() => {
      const w = window as unknown as { relaidOut: boolean; before: string };
      const now = document.querySelector('svg.graph g.node[data-node-id="check"]')?.getAttribute("transform");
      return { relaidOut: w.relaidOut, moved: now !== w.before };
    });
    expect(after).toEqual({ relaidOut: false, moved: false });

    // A node is reached by the keyboard (SVG's attribute is `tabindex`) and Enter selects it.
    const check = page.locator('svg.graph g.node[data-node-id="check"]');
    expect(await check.getAttribute("tabindex")).toBe("0");
    await check.focus();
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/node\/check$|node=check/);
  });
});
