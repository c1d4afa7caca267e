/**
 * Draws a workflow graph as SVG elements made by Preact: every id, type and condition is a text
 * node, so no definition can add markup, a link or a script to the drawing (there is no
 * diagram language parsed here, hence no directive to inject). Nodes are coloured by the
 * state of their current visit (style.css), edges the run took are drawn bold, the others pale.
 */
import { useId } from "preact/hooks";
import { shortTime, wakesAt, when } from "../format.js";
import type { MapCounts, Visit } from "../types.js";
import { NODE_HEIGHT, NODE_WIDTH } from "./layout.js";
import type { Graph } from "./model.js";
import { useGraphLayout } from "./use-layout.js";
import "./graph.css";

const ID_CHARS = 22;
const TYPE_CHARS = 26;
const LABEL_CHARS = 28;
const STATE_CHARS = 27;

export function GraphView(props: { graph: Graph; selected?: string | undefined; onSelect?: (nodeId: string) => void }) {
  const { graph, selected, onSelect } = props;
  const arrow = `arrow-${useId()}`;
  const drawn = useGraphLayout(graph);
  if (graph.nodes.length === 0) return <p class="muted">No nodes to draw yet.</p>;
  if (!drawn) {
    return (
      <p class="muted graph-pending" role="status">
        Laying out…
      </p>
    );
  }
  return (
    // biome-ignore lint/a11y/useSemanticElements: an <svg> cannot be a <fieldset>; the group holds the nodes (buttons).
    <svg
      class="graph"
      viewBox={`0 0 ${drawn.width} ${drawn.height}`}
      width={drawn.width}
      height={drawn.height}
      // A group, not an img: an img's children are presentational, and its nodes are buttons.
      role="group"
      aria-label="workflow graph"
    >
      <defs>
        {/* In user space: a bold (taken) edge keeps the same arrowhead as a thin one. */}
        <marker
          id={arrow}
          viewBox="0 0 10 10"
          refX="9"
          refY="5"
          markerUnits="userSpaceOnUse"
          markerWidth="10"
          markerHeight="10"
          orient="auto"
        >
          <path d="M 0 0 L 10 5 L 0 10 z" class="arrowhead" />
        </marker>
      </defs>
      {graph.edges.map((edge, i) => {
        const shape = drawn.shapes[i];
        if (!shape) return null;
        return (
          <g
            key={`${edge.kind}:${edge.from}:${edge.to}:${i}`}
            class={`edge edge-${edge.kind}${edge.taken ? " taken" : ""}${edge.loop ? " loop" : ""}`}
            data-from={edge.from}
            data-to={edge.to}
            data-taken={String(edge.taken)}
          >
            <path d={shape.d} marker-end={`url(#${arrow})`} />
            {edge.label !== undefined && edge.kind !== "depends" && (
              <text
                x={shape.labelX}
                y={shape.labelY}
                text-anchor="middle"
                dominant-baseline="central"
                class="edge-label"
              >
                <title>{edge.label}</title>
                {clip(edge.label, LABEL_CHARS)}
              </text>
            )}
          </g>
        );
      })}
      {graph.nodes.map((node) => {
        const box = drawn.boxes.get(node.id);
        if (!box) return null;
        const state = node.visit?.state;
        const wakes = node.visit ? wakesAt(node.visit) : null;
        // What the node's title and name say of it: its state, and when a sleeping one wakes.
        const status = state ? `: ${state}${wakes === null ? "" : `, wakes at ${when(wakes, Date.now()).full}`}` : "";
        const select = () => onSelect?.(node.id);
        return (
          // biome-ignore lint/a11y/useSemanticElements: an SVG group cannot be a <button>; role and keys make it one.
          <g
            key={node.id}
            class={`node state-${(state ?? "none").toLowerCase()}${node.id === selected ? " selected" : ""}`}
            data-node-id={node.id}
            data-state={state ?? "none"}
            transform={`translate(${box.x} ${box.y})`}
            role="button"
            // Lower case: Preact sets an SVG element's props as attributes, and SVG's is `tabindex` (`tabIndex` did nothing).
            tabindex={onSelect ? 0 : -1}
            aria-label={`${node.id}${status}`}
            onClick={select}
            onKeyDown={(e) => {
              if (e.key === "Enter" || e.key === " ") {
                e.preventDefault();
                select();
              }
            }}
          >
            <title>{`${node.id} (${node.agentType})${status}`}</title>
            <rect width={NODE_WIDTH} height={NODE_HEIGHT} rx="8" />
            <text x="10" y="20" class="node-id">
              {clip(node.id, ID_CHARS)}
            </text>
            <text x="10" y="37" class="node-type">
              {clip(node.agentType, TYPE_CHARS)}
            </text>
            {node.visit && (
              <text x="10" y="54" class="node-state">
                {clip(stateLine(node.visit), STATE_CHARS)}
              </text>
            )}
            {node.visit?.items && <MapBar counts={node.visit.items} />}
          </g>
        );
      })}
    </svg>
  );
}

/** Bar inside a map node's box, along its bottom edge. */
const BAR_X = 10;
const BAR_WIDTH = NODE_WIDTH - 2 * BAR_X;
const BAR_Y = NODE_HEIGHT - 6;
const BAR_HEIGHT = 3;

/** A map node's items as a bar: succeeded (green) then failed (red) out of the total (the track). */
function MapBar(props: { counts: MapCounts }) {
  const { total, succeeded, failed } = props.counts;
  const share = (n: number) => (total > 0 ? (BAR_WIDTH * n) / total : 0);
  return (
    <g class="map-bar" data-total={total} data-succeeded={succeeded} data-failed={failed}>
      <title>{`items: ${succeeded} succeeded, ${failed} failed, of ${total}`}</title>
      <rect class="map-track" x={BAR_X} y={BAR_Y} width={BAR_WIDTH} height={BAR_HEIGHT} />
      <rect class="map-succeeded" x={BAR_X} y={BAR_Y} width={share(succeeded)} height={BAR_HEIGHT} />
      <rect class="map-failed" x={BAR_X + share(succeeded)} y={BAR_Y} width={share(failed)} height={BAR_HEIGHT} />
    </g>
  );
}

/** `RUNNING · attempt 2`, `SUCCEEDED · 3/3` (a map's items); a sleeping node says when it wakes instead of WAITING. */
function stateLine(v: Visit): string {
  const { visit, attempt } = v;
  const items = v.items ?? null;
  const wakes = wakesAt(v);
  const parts = [wakes === null ? v.state : `wakes at ${shortTime(wakes, Date.now())}`];
  if (items) parts.push(`${items.succeeded + items.failed + items.cancelled}/${items.total}`);
  if (visit > 1) parts.push(`visit ${visit}`);
  if (attempt > 1) parts.push(`attempt ${attempt}`);
  return parts.join(" · ");
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
