/**
 * `map` (DESIGN §11.1): runs `payload.each` once per element of `payload.items`, at most
 * `max_concurrency` at a time, and succeeds with the outputs in item order.
 *
 * Each item is a child run of the map's run. `{ agent_type, payload }`: a run of a one-node
 * workflow made from `each` (`<workflow_id>/<node_id>`, built by the registry from the parent's
 * definition), so an item has the node's retry settings and timeout as its own (its node's) and
 * its templates resolve in the item run (they see `item` and `index`). `{ workflow_id, input }`:
 * a run of that workflow itself, `each.input` resolved for the item as it starts
 * (engine/writer/kinds/map-item-runs.ts). Either is started, recovered and cancelled like any
 * child run. The visit is held by `map` for as long as items run (core/kinds/map.ts); its items
 * are rows (`map_items`), started and settled by engine/writer/kinds/maps.ts. Its rules: the
 * payload, its defaults and limits, and who undoes its items.
 */
import type { Problem } from "../../errors.js";
import type { Json } from "../../json-text.js";
import { type KindRules, plainEdgesOnly } from "./kind.js";

/** Between a workflow id and a map node's id in the id of the map's item workflow (`/` is never in a workflow id). */
export const ITEM_SEPARATOR = "/";

export const MAP_DEFAULTS = { max_concurrency: 10, max_items: 10_000 } as const;
/**
 * How many failed items a map that succeeded within its tolerated failures lists (`failed_items`,
 * by index) in its counts and its node.succeeded event: a 10,000-item map's row and event stay small.
 */
export const FAILED_ITEMS_SHOWN = 100;
/** The most items a map may be given (`max_items` may not be set above it). */
export const MAX_ITEMS_LIMIT = 100_000;

/** A map's payload once resolved (`each` is kept as written: each item resolves it). */
export interface MapPayload {
  items: Json[];
  each:
    | { agent_type: string; payload?: Json; compensation?: Json }
    | { workflow_id: string; version?: number | null; input?: Json };
  max_concurrency: number;
  max_items: number;
  tolerated_failures: number | null;
  tolerated_failure_percent: number | null;
}

export const map: KindRules = {
  name: "map",
  start: "engine",
  notClaimable: "run their items as child runs the engine starts",
  retries: true,
  deferred: ["each"],
  undoes: (payload) => undoesItems(payload),
  validate(node, checks) {
    const problems: Problem[] = [];
    const at = `${checks.at}.payload`;
    if (node.compensation !== undefined && undoesItems(node.payload as Json)) {
      problems.push({
        path: `${checks.at}.compensation`,
        message:
          "a map node whose items declare compensation (each.compensation) cannot declare its own: undo per item, or once for the map, not both",
      });
    }
    for (const { path, message } of payloadProblems(node.payload as Json, true)) {
      problems.push({ path: path ? `${at}.${path}` : at, message });
    }
    problems.push(
      ...plainEdgesOnly(
        node,
        checks,
        "map",
        "the list of its items' outputs",
        " yet: list plain targets and branch on the node after it",
      ),
    );
    return problems;
  },
  checkResolved(payload) {
    const problem = payloadProblems(payload, false)[0];
    return problem ? `payload${problem.path ? `.${problem.path}` : ""} ${problem.message}` : null;
  },
};

/**
 * True when the map's items declare compensation: a failed run then undoes the items that
 * succeeded, newest first, one at a time (each item run compensates; engine/writer/kinds/maps.ts).
 */
export function undoesItems(payload: Json): boolean {
  const each = (payload as { each?: { compensation?: unknown } } | null)?.each;
  return each !== null && typeof each === "object" && each.compensation !== undefined;
}

/**
 * True when the map's items hold their own attempts in their rows (DESIGN §11.1): items of an
 * agent that undo nothing. An item of a workflow is a child run, and so is an item that declares
 * compensation (it undoes through its run's compensation rows).
 */
export function itemsAreRows(payload: Json): boolean {
  const each = (payload as { each?: object } | null)?.each;
  return each !== null && typeof each === "object" && !("workflow_id" in each) && !undoesItems(payload);
}

/** The resolved payload with its defaults (call after `checkResolved` accepted it). */
export function mapPayload(payload: Json): MapPayload {
  const p = payload as Record<string, Json>;
  return {
    items: p.items as Json[],
    each: p.each as MapPayload["each"],
    max_concurrency: (p.max_concurrency as number | undefined) ?? MAP_DEFAULTS.max_concurrency,
    max_items: (p.max_items as number | undefined) ?? MAP_DEFAULTS.max_items,
    tolerated_failures: (p.tolerated_failures as number | undefined) ?? null,
    tolerated_failure_percent: (p.tolerated_failure_percent as number | undefined) ?? null,
  };
}

/** How many items may fail (or be cancelled) before the map fails: `tolerated_failures`, else the percentage of the list. */
export function toleratedFailures(p: MapPayload, total: number): number {
  if (p.tolerated_failures !== null) return p.tolerated_failures;
  if (p.tolerated_failure_percent !== null) return Math.floor((total * p.tolerated_failure_percent) / 100);
  return 0;
}

const EXAMPLE =
  '{ "items": "{{ nodes.plan.output.questions }}", "each": { "agent_type": "researcher", "payload": { "question": "{{ item }}" } }, "max_concurrency": 4 }';

/** What is wrong with a map's payload (paths relative to `payload`); `templates`: unresolved templates pass. */
function payloadProblems(payload: Json, templates: boolean): { path: string; message: string }[] {
  const isTemplate = (x: unknown) => templates && typeof x === "string" && x.includes("{{");
  if (payload === null || typeof payload !== "object" || Array.isArray(payload)) {
    return [{ path: "", message: `must be an object, e.g. ${EXAMPLE}` }];
  }
  const problems: { path: string; message: string }[] = [];
  const p = payload;
  const maxItems = p.max_items;
  const integer = (name: string, min: number, max: number) => {
    const x = p[name];
    if (x === undefined || x === null || isTemplate(x)) return;
    if (typeof x !== "number" || !Number.isInteger(x) || x < min || x > max) {
      problems.push({ path: name, message: `must be an integer from ${min} to ${max}, got ${JSON.stringify(x)}` });
    }
  };
  integer("max_concurrency", 1, 10_000);
  integer("max_items", 1, MAX_ITEMS_LIMIT);
  integer("tolerated_failures", 0, MAX_ITEMS_LIMIT);
  const percent = p.tolerated_failure_percent;
  if (percent !== undefined && percent !== null && !isTemplate(percent)) {
    if (typeof percent !== "number" || !(percent >= 0 && percent <= 100)) {
      problems.push({
        path: "tolerated_failure_percent",
        message: `must be a number from 0 to 100, got ${JSON.stringify(percent)}`,
      });
    }
  }
  if (p.tolerated_failures !== undefined && percent !== undefined) {
    problems.push({
      path: "tolerated_failure_percent",
      message: "give tolerated_failures (a count) or tolerated_failure_percent, not both",
    });
  }
  const items = p.items;
  if (items === undefined) {
    problems.push({
      path: "items",
      message: `is required: the list to map over (a template giving an array), e.g. ${EXAMPLE}`,
    });
  } else if (!isTemplate(items)) {
    if (!Array.isArray(items)) {
      problems.push({
        path: "items",
        message: `must be a JSON array (the list to map over), got ${items === null ? "null" : typeof items}: make the template give an array, e.g. "{{ nodes.plan.output.questions }}"`,
      });
    } else {
      const limit = typeof maxItems === "number" ? maxItems : MAP_DEFAULTS.max_items;
      if (items.length > limit) {
        problems.push({
          path: "items",
          message: `has ${items.length} items, more than max_items (${limit}): raise max_items (at most ${MAX_ITEMS_LIMIT}) or split the list`,
        });
      }
    }
  }
  problems.push(...eachProblems(p.each));
  return problems;
}

function eachProblems(each: Json | undefined): { path: string; message: string }[] {
  if (each === null || typeof each !== "object" || Array.isArray(each)) {
    return [
      {
        path: "each",
        message: `is required: what runs per item, { "agent_type": ..., "payload": ... } or { "workflow_id": ..., "input": ... }`,
      },
    ];
  }
  const hasAgent = "agent_type" in each;
  const hasWorkflow = "workflow_id" in each;
  if (hasAgent === hasWorkflow) {
    return [
      {
        path: "each",
        message: hasAgent
          ? "has both agent_type and workflow_id: give agent_type (one agent per item) or workflow_id (a child workflow per item)"
          : 'needs agent_type (one agent per item, with "payload") or workflow_id (a child workflow per item, with "input")',
      },
    ];
  }
  const allowed = hasAgent ? ["agent_type", "payload", "compensation"] : ["workflow_id", "version", "input"];
  const problems = Object.keys(each)
    .filter((k) => !allowed.includes(k))
    .map((k) => ({ path: `each.${k}`, message: `is not a field of each here (it takes ${allowed.join(", ")})` }));
  const name = hasAgent ? each.agent_type : each.workflow_id;
  if (typeof name !== "string" || name === "" || name.includes("{{")) {
    const field = hasAgent ? "agent_type" : "workflow_id";
    problems.push({ path: `each.${field}`, message: `must be a name (not a template), got ${JSON.stringify(name)}` });
  } else if (hasAgent && name === "map") {
    problems.push({
      path: "each.agent_type",
      message: 'cannot be "map": map over a workflow that holds a map node instead',
    });
  }
  const isObject = (x: Json | undefined) => x !== null && typeof x === "object" && !Array.isArray(x);
  if (hasAgent && each.payload !== undefined && !isObject(each.payload)) {
    problems.push({
      path: "each.payload",
      message: `must be an object (the item agent's payload), e.g. { "question": "{{ item }}" }, got ${JSON.stringify(each.payload)}`,
    });
  }
  const compensation = each.compensation;
  if (
    compensation !== undefined &&
    (!isObject(compensation) || typeof (compensation as { agent_type?: unknown }).agent_type !== "string")
  ) {
    problems.push({
      path: "each.compensation",
      message:
        'must be { "agent_type": ..., "payload": { ... } }: the agent that undoes one item (its templates see self, the item\'s node)',
    });
  }
  return problems;
}
