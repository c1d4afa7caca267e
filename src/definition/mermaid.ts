/**
 * A workflow (and optionally a run of it) as Mermaid `flowchart` text (`skein graph`, and
 * `GET /v1/runs/:run_id/graph`). Mermaid node ids are
 * generated (`n0`, `n1`, ...), and every label is quoted with each character outside a small
 * safe set written as a Mermaid entity code (`#34;`), so no node id, `when` condition or error
 * message can close a label or inject a directive (`%%{init}%%`, `click`, a new line).
 */
import type { WorkflowGraph } from "./graph.js";

/**
 * What the picture reads of a visit: core's `Visit` has these fields (declared here, as the
 * definition layer imports nothing from core).
 */
export interface VisitView {
  node_id: string;
  state: string;
  visit: number;
  attempt: number;
  /** The targets its edge decision fired (null: not decided yet). */
  fired: readonly string[] | null;
  error: { message: string } | null;
}

export interface GraphNode {
  /** The node_id (never written to the output as an id). */
  id: string;
  /** Label lines, plain text: escaped when rendered. */
  lines: string[];
  /** A visit state: the node gets the class of that state. */
  state?: string;
}

export interface GraphEdge {
  from: string;
  to: string;
  /** Solid for depends_on and forward edges, dashed for loop-backs. */
  style: "solid" | "dashed";
  label?: string;
  /** On the run's path: drawn thick. */
  taken?: boolean;
}

export interface GraphModel {
  nodes: GraphNode[];
  edges: GraphEdge[];
}

/** Colours per visit state (class names are the states in lower case). */
const STATE_CLASSES: Record<string, string> = {
  PENDING: "fill:#f6f8fa,stroke:#8c959f",
  RUNNING: "fill:#ddf4ff,stroke:#0969da,stroke-width:2px",
  RETRYING: "fill:#fff8c5,stroke:#bf8700,stroke-width:2px",
  IN_REVIEW: "fill:#fbefff,stroke:#8250df",
  WAITING: "fill:#fbefff,stroke:#8250df",
  SUCCEEDED: "fill:#dafbe1,stroke:#1a7f37",
  FAILED: "fill:#ffebe9,stroke:#cf222e,stroke-width:2px",
  CANCELLED: "fill:#eaeef2,stroke:#57606a",
  SKIPPED: "fill:#ffffff,stroke:#d0d7de,color:#8c959f,stroke-dasharray:4 4,opacity:0.6",
};

/** Escapes text for a quoted Mermaid label: everything outside `[A-Za-z0-9 _.,:-]` becomes `#<code>;`. */
export function escapeLabel(text: string): string {
  let out = "";
  for (const ch of text) out += /^[A-Za-z0-9 _.,:-]$/.test(ch) ? ch : `#${ch.codePointAt(0)};`;
  return out;
}

export function renderMermaid(model: GraphModel): string {
  const ids = new Map(model.nodes.map((n, i) => [n.id, `n${i}`]));
  const lines = ["flowchart TD"];
  for (const node of model.nodes) {
    lines.push(`  ${ids.get(node.id)}["${node.lines.map(escapeLabel).join("<br/>")}"]`);
  }
  const taken: number[] = [];
  let index = 0;
  for (const edge of model.edges) {
    const from = ids.get(edge.from);
    const to = ids.get(edge.to);
    if (from === undefined || to === undefined) continue;
    const arrow = edge.style === "dashed" ? "-.->" : "-->";
    const label = edge.label === undefined ? "" : `|"${escapeLabel(edge.label)}"|`;
    lines.push(`  ${from} ${arrow}${label} ${to}`);
    if (edge.taken) taken.push(index);
    index += 1;
  }
  const byState = new Map<string, string[]>();
  for (const node of model.nodes) {
    if (node.state === undefined || !(node.state in STATE_CLASSES)) continue;
    byState.set(node.state, [...(byState.get(node.state) ?? []), ids.get(node.id) as string]);
  }
  for (const [state, members] of byState) {
    lines.push(`  classDef ${state.toLowerCase()} ${STATE_CLASSES[state]}`);
    lines.push(`  class ${members.join(",")} ${state.toLowerCase()}`);
  }
  if (taken.length > 0) lines.push(`  linkStyle ${taken.join(",")} stroke-width:3px`);
  return lines.join("\n");
}

/** What a run adds to the picture: its current visits (states) and every visit (the edges they fired). */
export interface RunOverlay {
  nodes: readonly VisitView[];
  visits: readonly VisitView[];
}

/**
 * The graph of a compiled workflow: depends_on edges solid, forward `next_on_*` edges solid and
 * labelled (`ok`, `fail` or the `when` condition), loop-backs dashed. With a run: node states,
 * and the edges its visits fired (or whose dependency succeeded) marked taken.
 */
export function graphModel(graph: WorkflowGraph, run?: RunOverlay): GraphModel {
  const current = new Map(run?.nodes.map((v) => [v.node_id, v]) ?? []);
  const fired = (from: string, to: string, state: "SUCCEEDED" | "FAILED") =>
    run?.visits.some((v) => v.node_id === from && v.state === state && (v.fired ?? []).includes(to)) ?? false;
  const nodes: GraphNode[] = [];
  const edges: GraphEdge[] = [];
  for (const id of graph.order) {
    const node = graph.nodes.get(id);
    if (!node) continue;
    const visit = current.get(id);
    nodes.push({ id, lines: labelLines(id, node.agent_type, visit), ...(visit ? { state: visit.state } : {}) });
    for (const dep of node.depends_on) {
      edges.push({ from: dep, to: id, style: "solid", taken: current.get(dep)?.state === "SUCCEEDED" });
    }
    for (const c of successCases(node.def.next_on_success)) {
      for (const to of c.to) {
        const style = graph.isForward(id, to) ? "solid" : "dashed";
        edges.push({ from: id, to, style, label: c.when ?? "ok", taken: fired(id, to, "SUCCEEDED") });
      }
    }
    for (const to of node.failureTargets) {
      const style = graph.isForward(id, to) ? "solid" : "dashed";
      edges.push({ from: id, to, style, label: "fail", taken: fired(id, to, "FAILED") });
    }
  }
  return { nodes, edges };
}

function labelLines(id: string, agentType: string, visit: VisitView | undefined): string[] {
  const lines = [id, agentType];
  if (!visit) return lines;
  const details: string[] = [visit.state];
  if (visit.visit > 1) details.push(`visit ${visit.visit}`);
  if (visit.attempt > 1) details.push(`${visit.attempt} attempts`);
  lines.push(details.join(", "));
  if (visit.state === "FAILED" && visit.error) lines.push(oneLine(visit.error.message, 60));
  return lines;
}

/** `text` on one line, at most `max` characters (the CLI's `oneLine`, which this layer does not import). */
function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s*\n\s*/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

type SuccessSpec = string | (string | { when?: string; to: string | string[] })[] | undefined;

/** `next_on_success` as cases: a plain id or list is one case without `when`. */
function successCases(spec: SuccessSpec): { when?: string; to: string[] }[] {
  if (spec === undefined) return [];
  if (typeof spec === "string") return [{ to: [spec] }];
  const plain = spec.filter((x): x is string => typeof x === "string");
  const cases = spec.filter((x): x is { when?: string; to: string | string[] } => typeof x !== "string");
  return [
    ...(plain.length > 0 ? [{ to: plain }] : []),
    ...cases.map((c) => ({ ...(c.when === undefined ? {} : { when: c.when }), to: [c.to].flat() })),
  ];
}
