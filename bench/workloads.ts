/** The workflow definitions the bench runs, and the no-op agents that serve them. */
import type { AgentHandler, WorkflowInput } from "../src/index.js";

/** An agent that returns at once. */
export const noop: AgentHandler = () => ({ ok: true });

/** A parent node and `n` children that all depend on it (ids `child_00`.., padded to the widest index). */
export function fanout(id: string, n: number) {
  const width = String(n - 1).length;
  return {
    id,
    nodes: [
      { node_id: "parent", agent_type: "parent" },
      ...Array.from({ length: n }, (_, i) => ({
        node_id: `child_${String(i).padStart(width, "0")}`,
        agent_type: "child",
        depends_on: ["parent"],
      })),
    ],
  };
}

/** A parent node and 50 children that all depend on it. */
export const FANOUT50 = fanout("bench-fanout50", 50);

/** `n` steps in a row, each depending on the one before (`step_000` → `step_001` → ...). */
export function sequence(id: string, n: number) {
  const width = Math.max(3, String(n - 1).length);
  const name = (i: number) => `step_${String(i).padStart(width, "0")}`;
  return {
    id,
    nodes: Array.from({ length: n }, (_, i) => ({
      node_id: name(i),
      agent_type: "step",
      ...(i > 0 ? { depends_on: [name(i - 1)] } : {}),
    })),
  };
}

/**
 * The 8-node shape of the case study (DESIGN §2) without its branch and loop: 3 parallel
 * collectors, a reviewer joining them, 3 parallel publishers after it, and the built-in
 * aggregator joining the publishers.
 */
export const DAG8 = {
  id: "bench-dag8",
  nodes: [
    { node_id: "fetch_a", agent_type: "collector", payload: { platform: "a" } },
    { node_id: "fetch_b", agent_type: "collector", payload: { platform: "b" } },
    { node_id: "fetch_c", agent_type: "collector", payload: { platform: "c" } },
    { node_id: "review", agent_type: "reviewer", depends_on: ["fetch_a", "fetch_b", "fetch_c"] },
    { node_id: "publish_a", agent_type: "publisher", payload: { platform: "a" }, depends_on: ["review"] },
    { node_id: "publish_b", agent_type: "publisher", payload: { platform: "b" }, depends_on: ["review"] },
    { node_id: "publish_c", agent_type: "publisher", payload: { platform: "c" }, depends_on: ["review"] },
    { node_id: "summary", agent_type: "aggregator", depends_on: ["publish_a", "publish_b", "publish_c"] },
  ],
};

export const DAG8_AGENTS: Record<string, AgentHandler> = { collector: noop, reviewer: noop, publisher: noop };

/** One node for an external worker (the http bench's claim → complete round trips). */
export const SINGLE_EXTERNAL = {
  id: "bench-single-external",
  nodes: [{ node_id: "only", agent_type: "ext_work" }],
};

/** A single node whose agent type no engine serves: its runs stay parked, ready but unclaimed. */
export const PARKED = {
  id: "bench-parked",
  nodes: [{ node_id: "wait", agent_type: "nobody" }],
};

/** Two WAITING nodes, side by side: an event that never comes (within a year) and a 30-day sleep. */
export const WAITING = {
  id: "bench-waiting",
  timeout: 400 * 24 * 3600,
  nodes: [
    { node_id: "paid", agent_type: "wait_event", payload: { event: "paid" }, timeout: 365 * 24 * 3600 },
    { node_id: "nap", agent_type: "sleep", payload: { seconds: 30 * 24 * 3600 } },
  ],
};

/** Visits of each of LONG_LOOP's two looping nodes. */
const LOOP_VISITS = 500;
/** The visits LONG_LOOP's run makes before its loop runs out: 1,000, with about 4,000 events. */
export const LONG_LOOP_VISITS = 2 * LOOP_VISITS;

/**
 * A draft critiqued and revised until the critic passes it, which it never does: the loop runs
 * out of visits (the ui bench's page of a long run).
 */
export const LONG_LOOP = {
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

export const LONG_LOOP_AGENTS: Record<string, AgentHandler> = {
  writer: () => ({ text: "a draft" }),
  critic: () => ({ score: 0.1 }),
};

/** Two steps; the recovery bench kills the engine while `first` is in flight. */
export const RECOVERY = {
  id: "bench-recovery",
  nodes: [
    { node_id: "first", agent_type: "work" },
    { node_id: "second", agent_type: "work", depends_on: ["first"] },
  ],
};

/**
 * Two steps served by two engine processes (the xproc bench): one engine has the handler for
 * `xp_first` only, another for `xp_second` only, so `second` is started by the other engine.
 */
export const XPROC = {
  id: "bench-xproc",
  nodes: [
    { node_id: "first", agent_type: "xp_first" },
    { node_id: "second", agent_type: "xp_second", depends_on: ["first"] },
  ],
};

/**
 * One `map` node over the run's `input.items`, each item a `map_item` agent given the item (the
 * map bench). `max_concurrency` items at a time.
 */
export function mapWorkflow(maxConcurrency: number) {
  return {
    id: "bench-map",
    nodes: [
      {
        node_id: "each",
        agent_type: "map",
        payload: {
          items: "{{ input.items }}",
          each: { agent_type: "map_item", payload: { item: "{{ item }}" } },
          max_concurrency: maxConcurrency,
        },
      },
    ],
  };
}

export const MAP_AGENTS: Record<string, AgentHandler> = { map_item: noop };

/**
 * A large realistic workflow for drawing (the admin page's graph, `ui_graph1000_ms`): 4 chains of
 * blocks of 10 nodes, `n / 40` blocks each (n a multiple of 40). A block fans out from a split to
 * three workers (one of them two steps long), joins them, and checks the join: on success a `when`
 * case goes on to the next block's split and the default case to a rework node, which in every
 * fifth block loops back to the check (elsewhere it ends there); on failure an alert. Every tenth
 * block's join also waits for the chain to its left. Deterministic: the same `n`, the same workflow.
 */
export function graphWorkflow(id: string, n: number): WorkflowInput & { id: string; nodes: { node_id: string }[] } {
  const chains = 4;
  const blocks = Math.floor(n / (chains * 10));
  const name = (c: number, b: number, part: string) => `c${c}_b${String(b).padStart(2, "0")}_${part}`;
  const nodes: WorkflowInput["nodes"] = [];
  for (let c = 0; c < chains; c++) {
    for (let b = 0; b < blocks; b++) {
      const at = (part: string) => name(c, b, part);
      const looping = b % 5 === 2;
      nodes.push(
        { node_id: at("split"), agent_type: "splitter" },
        { node_id: at("fetch"), agent_type: "collector", depends_on: [at("split")] },
        { node_id: at("parse"), agent_type: "parser", depends_on: [at("fetch")] },
        { node_id: at("score"), agent_type: "scorer", depends_on: [at("split")] },
        { node_id: at("tag"), agent_type: "tagger", depends_on: [at("split")] },
        {
          node_id: at("join"),
          agent_type: "aggregator",
          depends_on: [
            at("parse"),
            at("score"),
            at("tag"),
            ...(c > 0 && b % 10 === 5 ? [name(c - 1, b, "parse")] : []),
          ],
        },
        {
          node_id: at("check"),
          agent_type: "reviewer",
          depends_on: [at("join")],
          ...(looping ? { max_visits: 3 } : {}),
          next_on_success: [
            ...(b + 1 < blocks ? [{ when: "output.score >= 0.8", to: name(c, b + 1, "split") }] : []),
            { to: at("rework") },
          ],
          next_on_failure: at("alert"),
        },
        { node_id: at("rework"), agent_type: "editor", ...(looping ? { next_on_success: at("check") } : {}) },
        { node_id: at("alert"), agent_type: "pager" },
        { node_id: at("note"), agent_type: "notifier", depends_on: [at("tag")] },
      );
    }
  }
  return { id, nodes };
}
