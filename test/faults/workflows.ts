/**
 * The workflows of the fault cases and what each run of them must end as. Agents are
 * test/fixtures/fault-agents.mjs (`work`, `fail`, `undo`); behaviour is in the payloads.
 */
import type { Expectation } from "./oracles.js";
import { succeeds } from "./oracles.js";

const defaults = { retry_count: 3, retry_interval: 0.05, timeout: 60 };

/** start → a, b, c → join. */
export const FAN = {
  id: "fault-fan",
  defaults,
  nodes: [
    { node_id: "start", agent_type: "work" },
    { node_id: "a", agent_type: "work", depends_on: ["start"] },
    { node_id: "b", agent_type: "work", depends_on: ["start"] },
    { node_id: "c", agent_type: "work", depends_on: ["start"] },
    { node_id: "join", agent_type: "work", depends_on: ["a", "b", "c"] },
  ],
};

/** check → left (when input.left) or right → merge (join any). */
export const COND = {
  id: "fault-cond",
  defaults,
  nodes: [
    {
      node_id: "check",
      agent_type: "work",
      next_on_success: [{ when: "output.left = true", to: ["left"] }, { to: ["right"] }],
    },
    { node_id: "left", agent_type: "work" },
    { node_id: "right", agent_type: "work" },
    { node_id: "merge", agent_type: "work", depends_on: ["left", "right"], join: "any" },
  ],
};

/** a → b, where b fails (retryably) until its third attempt. */
export const RETRY = {
  id: "fault-retry",
  defaults,
  nodes: [
    { node_id: "a", agent_type: "work" },
    { node_id: "b", agent_type: "work", depends_on: ["a"], payload: { fail_below: 3 } },
  ],
};

/** reserve → charge → ship, where ship fails for good: the run undoes ship, charge, reserve. */
export const SAGA = {
  id: "fault-saga",
  defaults,
  nodes: [
    { node_id: "reserve", agent_type: "work", compensation: { agent_type: "undo" } },
    { node_id: "charge", agent_type: "work", depends_on: ["reserve"], compensation: { agent_type: "undo" } },
    { node_id: "ship", agent_type: "fail", depends_on: ["charge"], compensation: { agent_type: "undo" } },
  ],
};

export const MIXED = [FAN, COND, RETRY, SAGA];

/** A failed saga ends only once everything it planned to undo is undone (DESIGN §6). */
export const compensated: Expectation = (run, h) => {
  if (run.status !== "FAILED") return `${run.status}, not FAILED`;
  if (run.needs_attention) return "needs attention";
  if (h.compensations.length === 0) return "nothing compensated";
  const open = h.compensations.filter((c) => c.state !== "SUCCEEDED");
  if (open.length > 0) return `ended with compensations ${open.map((c) => `${c.node_id} ${c.state}`).join(", ")}`;
  const types = h.events.map((e) => e.type);
  if (types.indexOf("run.failed") < types.lastIndexOf("compensation.succeeded")) {
    return "run.failed recorded before its last compensation";
  }
  return null;
};

const current = (h: Parameters<Expectation>[1], node: string) =>
  h.visits.find((v) => v.is_current && v.node_id === node);

/**
 * Every mixed run succeeds (or fails `interrupted` as a poison task), through the right branch,
 * each join once; a saga fails and compensates in full.
 */
export const mixedEnds: Expectation = (run, h) => {
  if (run.workflow_id === SAGA.id) return compensated(run, h);
  const base = succeeds(run, h);
  if (base || run.status !== "SUCCEEDED") return base;
  const joined = (node: string) => h.events.filter((e) => e.type === "node.succeeded" && e.node_id === node).length;
  if (run.workflow_id === FAN.id && joined("join") !== 1) return `join succeeded ${joined("join")} times`;
  if (run.workflow_id === COND.id) {
    const left = current(h, "check")?.output as { left?: boolean } | undefined;
    const taken = left?.left === true ? "left" : "right";
    const other = taken === "left" ? "right" : "left";
    if (current(h, taken)?.state !== "SUCCEEDED" || current(h, other)?.state !== "SKIPPED") {
      return `branch: ${taken} ${current(h, taken)?.state}, ${other} ${current(h, other)?.state}`;
    }
    if (joined("merge") !== 1) return `merge succeeded ${joined("merge")} times`;
  }
  if (run.workflow_id === RETRY.id) {
    const b = current(h, "b");
    // Every attempt before the last one failed or was interrupted: retries are not lost or added.
    if (!b || b.attempt < 3 || b.failures + b.interruptions !== b.attempt - 1) {
      return `b succeeded at attempt ${b?.attempt} after ${b?.failures} failures and ${b?.interruptions} interruptions`;
    }
  }
  return null;
};

/** One quick step: the runs a schedule starts (case k). */
export const TICK = {
  id: "fault-tick",
  defaults,
  nodes: [{ node_id: "tick", agent_type: "work" }],
};
