/**
 * The graph's layout by ELK's layered algorithm (elkjs, the Eclipse Layout Kernel compiled to
 * JavaScript), top to bottom: crossings minimised, edges routed orthogonally between the nodes,
 * loop-backs (edges to a node listed earlier) reversed by document order and drawn as lanes
 * going back up, edge labels given their own space on the edge so they never pile up.
 *
 * elkjs is large (about 1.6 MB), so it is loaded on first use, as its own file, and runs on the
 * main thread: a Web Worker would need a Trusted Types policy, which the page's CSP forbids.
 * `toElk` and `fromElk` are pure (unit-tested); `elkLayout` runs ELK between them.
 */
import type { ELK, ElkExtendedEdge, ElkNode } from "elkjs/lib/elk-api.js";
import { type EdgeShape, type Layout, type LayoutEdge, NODE_HEIGHT, NODE_WIDTH } from "./layout.js";

export interface LabelledEdge extends LayoutEdge {
  /** Drawn on the edge: ELK is given its size to keep room for it. */
  label?: string | undefined;
}

/** A label's box as the view draws it (11px text: see .edge-label in graph.css). */
export const LABEL_HEIGHT = 16;
export const labelWidth = (text: string): number => Math.ceil(text.length * 6.2) + 8;

/** ELK's options: what makes our graphs read like the hand-written layout did, and better. */
const OPTIONS = {
  "elk.algorithm": "layered",
  "elk.direction": "DOWN",
  "elk.edgeRouting": "ORTHOGONAL",
  // An edge against document order is the one reversed to break a cycle: the engine's own
  // notion of a loop-back (DESIGN §4), so a loop is drawn going back up, never its forward edge.
  "elk.layered.cycleBreaking.strategy": "MODEL_ORDER",
  "elk.layered.considerModelOrder.strategy": "NODES_AND_EDGES",
  // Reversed edges leave their node at the bottom and enter the other at the top, around the side.
  "elk.layered.feedbackEdges": "true",
  "elk.spacing.nodeNode": "28",
  "elk.layered.spacing.nodeNodeBetweenLayers": "40",
  "elk.spacing.edgeNode": "16",
  "elk.spacing.edgeEdge": "10",
  "elk.spacing.edgeLabel": "4",
  "elk.edgeLabels.placement": "CENTER",
  "elk.padding": "[top=16,left=16,bottom=16,right=16]",
};

/** ELK's input: node ids prefixed `n`, edge ids `e<index>` (index into `edges`); edges with an unknown end left out. */
export function toElk(ids: readonly string[], edges: readonly LabelledEdge[]): ElkNode {
  const known = new Set(ids);
  return {
    id: "graph",
    layoutOptions: OPTIONS,
    children: ids.map((id) => ({ id: `n${id}`, width: NODE_WIDTH, height: NODE_HEIGHT })),
    edges: edges.flatMap((edge, i): ElkExtendedEdge[] =>
      known.has(edge.from) && known.has(edge.to)
        ? [
            {
              id: `e${i}`,
              sources: [`n${edge.from}`],
              targets: [`n${edge.to}`],
              ...(edge.label
                ? { labels: [{ text: edge.label, width: labelWidth(edge.label), height: LABEL_HEIGHT }] }
                : {}),
            },
          ]
        : [],
    ),
  };
}

/** ELK's answer as a Layout: boxes by node id, each edge's polyline and its label's centre. */
export function fromElk(out: ElkNode, edgeCount: number): Layout {
  const boxes: Layout["boxes"] = new Map();
  for (const child of out.children ?? []) boxes.set(child.id.slice(1), { x: child.x ?? 0, y: child.y ?? 0, layer: 0 });
  const shapes: (EdgeShape | null)[] = Array.from({ length: edgeCount }, () => null);
  for (const edge of out.edges ?? []) {
    const section = edge.sections?.[0];
    if (!section) continue;
    const points = [section.startPoint, ...(section.bendPoints ?? []), section.endPoint];
    const label = edge.labels?.[0];
    // Without a label, the middle bend point (a label position is only needed when there is one).
    const middle = points[Math.floor(points.length / 2)] ?? section.startPoint;
    shapes[Number(edge.id.slice(1))] = {
      d: points.map((p, k) => `${k === 0 ? "M" : "L"} ${p.x} ${p.y}`).join(" "),
      labelX: label ? (label.x ?? 0) + (label.width ?? 0) / 2 : middle.x,
      labelY: label ? (label.y ?? 0) + (label.height ?? 0) / 2 : middle.y,
    };
  }
  return { width: out.width ?? 0, height: out.height ?? 0, boxes, layers: [], shapes };
}

let engine: Promise<ELK> | undefined;

/** Lays the graph out with ELK (loaded on the first call). @throws what ELK throws */
export async function elkLayout(ids: readonly string[], edges: readonly LabelledEdge[]): Promise<Layout> {
  engine ??= import("elkjs/lib/elk.bundled.js").then((module) => {
    // A CommonJS file whose module.exports is the class: Vite and Node both give it as `default`,
    // which TypeScript's NodeNext resolution (the tests') types as the whole module.
    const Elk = module.default as unknown as new () => ELK;
    return new Elk();
  });
  const out = await (await engine).layout(toElk(ids, edges));
  return fromElk(out, edges.length);
}
