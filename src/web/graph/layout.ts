/**
 * A small layered layout for workflow graphs (top to bottom, like Mermaid's `flowchart TD`), for
 * graphs too large for ELK to lay out in time (use-layout.ts): it is near-linear, but routes no
 * edge around the nodes in its way, so ELK (elk-layout.ts) draws every graph it has time for.
 *
 * 1. Layers: a node sits one layer below the lowest of its predecessors along the forward edges
 *    (loop-backs are left out, so loops draw as edges going back up). A cycle among forward
 *    edges (an invalid definition being typed) is broken at the node listed first.
 * 2. Order within a layer: document order, then a few sweeps that sort each layer by the mean
 *    position of its neighbours (the barycenter heuristic), which removes most crossings.
 * 3. Coordinates: layers centred on the widest one; loop-back edges run in lanes on the side
 *    nearer their ends.
 */

export const NODE_WIDTH = 176;
export const NODE_HEIGHT = 62;
const GAP_X = 28;
const GAP_Y = 56;
const MARGIN = 16;
const LANE = 16;
const SWEEPS = 4;

export interface LayoutEdge {
  from: string;
  to: string;
  loop: boolean;
}

export interface Box {
  /** Top-left corner. */
  x: number;
  y: number;
  layer: number;
}

export interface EdgeShape {
  /** SVG path data. */
  d: string;
  /** The centre of its label. */
  labelX: number;
  labelY: number;
}

export interface Layout {
  width: number;
  height: number;
  boxes: Map<string, Box>;
  /** Node ids per layer, in drawing order. */
  layers: string[][];
  /** Per edge (same order as given), its path; null for an edge with an unknown end. */
  shapes: (EdgeShape | null)[];
}

export function layout(ids: readonly string[], edges: readonly LayoutEdge[]): Layout {
  const known = new Set(ids);
  const flow = edges.filter((e) => !e.loop && e.from !== e.to && known.has(e.from) && known.has(e.to));
  const layerOf = assignLayers(ids, flow);
  const layers: string[][] = [];
  for (const id of ids) {
    const layer = layerOf.get(id) ?? 0;
    (layers[layer] ??= []).push(id);
  }
  orderLayers(layers, flow);

  const widest = Math.max(1, ...layers.map((l) => l.length));
  const contentWidth = widest * NODE_WIDTH + (widest - 1) * GAP_X;
  const place = (left: number) => {
    const boxes = new Map<string, Box>();
    layers.forEach((layer, i) => {
      const layerWidth = layer.length * NODE_WIDTH + (layer.length - 1) * GAP_X;
      const start = left + (contentWidth - layerWidth) / 2;
      layer.forEach((id, j) => {
        boxes.set(id, { x: start + j * (NODE_WIDTH + GAP_X), y: MARGIN + i * (NODE_HEIGHT + GAP_Y), layer: i });
      });
    });
    return boxes;
  };

  // Edges that cannot be drawn downwards (loop-backs, broken cycles, edges within a layer) each get
  // a lane, on the side nearer their two ends, so they cross as few nodes as possible.
  const centre = (box: Box) => box.x + NODE_WIDTH / 2;
  const unplaced = place(0);
  const sides = edges.map((edge) => {
    const from = unplaced.get(edge.from);
    const to = unplaced.get(edge.to);
    if (!from || !to || edge.from === edge.to || (!edge.loop && to.layer > from.layer)) return null;
    return (centre(from) + centre(to)) / 2 < contentWidth / 2 ? "left" : "right";
  });
  const leftLanes = sides.filter((side) => side === "left").length;
  const rightLanes = sides.filter((side) => side === "right").length;
  const contentLeft = MARGIN + (leftLanes > 0 ? (leftLanes + 1) * LANE : 0);
  const contentRight = contentLeft + contentWidth;
  const boxes = place(contentLeft);

  let left = 0;
  let right = 0;
  const shapes = edges.map((edge, i) => {
    const from = boxes.get(edge.from);
    const to = boxes.get(edge.to);
    if (!from || !to) return null;
    if (edge.from === edge.to) return selfLoop(from);
    const side = sides[i];
    if (side === "left") return sideways(from, to, contentLeft - ++left * LANE, "left");
    if (side === "right") return sideways(from, to, contentRight + ++right * LANE, "right");
    return downward(from, to);
  });

  return {
    width: contentRight + MARGIN + (rightLanes > 0 ? (rightLanes + 1) * LANE : 0),
    height: MARGIN * 2 + layers.length * NODE_HEIGHT + Math.max(0, layers.length - 1) * GAP_Y,
    boxes,
    layers,
    shapes,
  };
}

/** Longest path from the sources over forward edges, visiting nodes in topological (then document) order. */
function assignLayers(ids: readonly string[], flow: readonly LayoutEdge[]): Map<string, number> {
  const position = new Map(ids.map((id, i) => [id, i]));
  const indegree = new Map(ids.map((id) => [id, 0]));
  const successors = new Map<string, string[]>(ids.map((id) => [id, []]));
  const predecessors = new Map<string, string[]>(ids.map((id) => [id, []]));
  for (const e of flow) {
    indegree.set(e.to, (indegree.get(e.to) ?? 0) + 1);
    successors.get(e.from)?.push(e.to);
    predecessors.get(e.to)?.push(e.from);
  }
  const layer = new Map<string, number>();
  const ready = ids.filter((id) => indegree.get(id) === 0);
  while (layer.size < ids.length) {
    // A cycle leaves no node ready: break it at the first node not yet placed.
    if (ready.length === 0) ready.push(ids.find((id) => !layer.has(id)) as string);
    ready.sort((a, b) => (position.get(a) ?? 0) - (position.get(b) ?? 0));
    const id = ready.shift() as string;
    if (layer.has(id)) continue;
    const placed = (predecessors.get(id) ?? []).filter((p) => layer.has(p));
    layer.set(id, Math.max(0, ...placed.map((p) => (layer.get(p) ?? 0) + 1)));
    for (const next of successors.get(id) ?? []) {
      const left = (indegree.get(next) ?? 0) - 1;
      indegree.set(next, left);
      if (left === 0 && !layer.has(next)) ready.push(next);
    }
  }
  return layer;
}

/** Sorts each layer by the mean position of its neighbours in the layer above (down sweeps) or below (up sweeps). */
function orderLayers(layers: string[][], flow: readonly LayoutEdge[]): void {
  const position = new Map<string, number>();
  const measure = (layer: string[]) => {
    for (const [i, id] of layer.entries()) position.set(id, i - (layer.length - 1) / 2);
  };
  const sortBy = (layer: string[], neighbours: (id: string) => string[]) => {
    const key = new Map<string, number>();
    for (const id of layer) {
      const around = neighbours(id).filter((n) => position.has(n));
      key.set(
        id,
        around.length === 0
          ? (position.get(id) ?? 0)
          : around.reduce((sum, n) => sum + (position.get(n) ?? 0), 0) / around.length,
      );
    }
    layer.sort((a, b) => (key.get(a) ?? 0) - (key.get(b) ?? 0)); // stable: ties keep their order
    measure(layer); // only this layer's positions changed
  };
  // Neighbours looked up once: filtering the edges per node made a 10,000-node graph take 30 s.
  const predecessors = new Map<string, string[]>();
  const successors = new Map<string, string[]>();
  for (const e of flow) {
    (predecessors.get(e.to) ?? predecessors.set(e.to, []).get(e.to))?.push(e.from);
    (successors.get(e.from) ?? successors.set(e.from, []).get(e.from))?.push(e.to);
  }
  const preds = (id: string) => predecessors.get(id) ?? [];
  const succs = (id: string) => successors.get(id) ?? [];
  for (const layer of layers) measure(layer);
  for (let sweep = 0; sweep < SWEEPS; sweep++) {
    for (let i = 1; i < layers.length; i++) sortBy(layers[i] as string[], preds);
    for (let i = layers.length - 2; i >= 0; i--) sortBy(layers[i] as string[], succs);
  }
}

/** From the bottom of one node to the top of a lower one, as an S-curve. */
function downward(from: Box, to: Box): EdgeShape {
  const sx = from.x + NODE_WIDTH / 2;
  const sy = from.y + NODE_HEIGHT;
  const ex = to.x + NODE_WIDTH / 2;
  const ey = to.y;
  const bend = Math.max(24, (ey - sy) / 2);
  return {
    d: `M ${sx} ${sy} C ${sx} ${sy + bend}, ${ex} ${ey - bend}, ${ex} ${ey}`,
    labelX: (sx + ex) / 2,
    labelY: (sy + ey) / 2,
  };
}

/** From one side of a node out to a lane and back into the same side of another. */
function sideways(from: Box, to: Box, laneX: number, side: "left" | "right"): EdgeShape {
  const offset = side === "right" ? NODE_WIDTH : 0;
  const sx = from.x + offset;
  const sy = from.y + NODE_HEIGHT / 2;
  const ex = to.x + offset;
  const ey = to.y + NODE_HEIGHT / 2;
  // The control points sit a third beyond the lane, so the curve's far side touches it.
  const nearest = side === "right" ? Math.max(sx, ex) : Math.min(sx, ex);
  const cx = laneX + (laneX - nearest) / 3;
  return {
    d: `M ${sx} ${sy} C ${cx} ${sy}, ${cx} ${ey}, ${ex} ${ey}`,
    labelX: (sx + 6 * cx + ex) / 8,
    labelY: (sy + ey) / 2,
  };
}

/** A node's edge to itself: a small loop on its right side. */
function selfLoop(box: Box): EdgeShape {
  const x = box.x + NODE_WIDTH;
  const y = box.y + NODE_HEIGHT / 2;
  return {
    d: `M ${x} ${y - 12} C ${x + 44} ${y - 36}, ${x + 44} ${y + 36}, ${x} ${y + 12}`,
    labelX: x + 34,
    labelY: y,
  };
}
