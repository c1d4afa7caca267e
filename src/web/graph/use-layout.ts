/**
 * Which layout a graph gets, and when: ELK (elk-layout.ts) for graphs of up to ELK_MAX_NODES
 * nodes, asynchronously; beyond that the hand-written layered layout (layout.ts), which is
 * near-linear: 1,000 nodes in under 0.1 s where ELK took 20 s and dagre 9 s, in Node on a loaded
 * machine; at 40 to 120 nodes ELK took 1 to 6 s there, and routed no edge through a node while the
 * hand-written layout routed 8 of 44 to 27 of 144. Layouts are kept by the graph's structure (node ids,
 * edges and their labels), not its states, so a run's live updates never lay the graph out again.
 */
import { useEffect, useState } from "preact/hooks";
import { elkLayout } from "./elk-layout.js";
import { type Layout, layout } from "./layout.js";
import type { Graph } from "./model.js";

/** Above this many nodes ELK would take longer than the 2 s a graph may take to draw (an estimate: see above). */
export const ELK_MAX_NODES = 150;
/** Layouts kept (the run page, the editor's preview, a few versions of a workflow). */
const KEPT = 16;

const kept = new Map<string, Layout>();

/** What a layout depends on: ids, and each edge's ends, label and loop flag, in order (shapes are by edge index). */
export function structureKey(graph: Graph): string {
  return JSON.stringify([
    graph.nodes.map((n) => n.id),
    graph.edges.map((e) => [e.from, e.to, e.kind === "depends" ? null : (e.label ?? null), e.loop]),
  ]);
}

function keep(key: string, drawn: Layout): Layout {
  kept.delete(key);
  kept.set(key, drawn);
  if (kept.size > KEPT) kept.delete(kept.keys().next().value as string);
  return drawn;
}

function handWritten(graph: Graph): Layout {
  return layout(
    graph.nodes.map((n) => n.id),
    graph.edges,
  );
}

/** The graph's layout, or null while ELK computes it (the view says "Laying out…"). */
export function useGraphLayout(graph: Graph): Layout | null {
  const key = structureKey(graph);
  const large = graph.nodes.length > ELK_MAX_NODES;
  const [done, setDone] = useState<{ key: string; drawn: Layout } | null>(null);
  const ready = kept.get(key) ?? (large ? keep(key, handWritten(graph)) : undefined);
  // Keyed by the graph's structure: its states (a live update) do not change the layout.
  useEffect(() => {
    if (kept.has(key)) return;
    let current = true;
    const ids = graph.nodes.map((n) => n.id);
    const edges = graph.edges.map((e) => ({ ...e, label: e.kind === "depends" ? undefined : e.label }));
    void elkLayout(ids, edges)
      // ELK refusing a graph (none seen) must not leave the page without one: the hand-written layout draws anything.
      .catch(() => handWritten(graph))
      .then((drawn) => {
        keep(key, drawn);
        if (current) setDone({ key, drawn });
      });
    return () => {
      current = false;
    };
  }, [key]);
  return ready ?? (done?.key === key ? done.drawn : null);
}
