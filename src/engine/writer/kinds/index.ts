/**
 * The kinds the engine starts, by kind name (a node's agent_type): each one's in-transaction
 * step (step.ts), built with the flush. The flush hands each visit its core kind asked to start
 * (`Changes.starts`) to the step of its kind, and goes round, sweeps and takes over through them.
 * Adding such a kind is a step file here and a line below (`addKindStep` for one from outside).
 */
import { map } from "../../../definition/kinds/map.js";
import { workflow } from "../../../definition/kinds/workflow.js";
import type { Budget } from "../budget.js";
import type { FlushContext } from "../context.js";
import { Children } from "./children.js";
import { Maps } from "./maps.js";
import type { ChildRuns, KindStep } from "./step.js";

export type { ChildRuns, KindStep } from "./step.js";

/** The steps of one flush, by kind name (in the order rounds and sweeps go through them), and the child runs they share. */
export interface KindSteps {
  steps: ReadonlyMap<string, KindStep>;
  children: Children;
  /** The `map` step, for the `continue_map` inputs it leaves for the next flush. */
  maps: Maps;
}

/** What a step is built from, in each flush. */
export interface StepParts {
  f: FlushContext;
  budget: Budget;
  children: ChildRuns;
  /** This flush has no room to start more: ready visits of every such kind wait for the next one (bounded-work.ts). */
  defer: () => void;
}

const ADDED = new Map<string, (parts: StepParts) => KindStep>();

/** Adds the step of a kind added to the rules' and states' tables, built in each flush like the lines below. */
export function addKindStep(kind: string, build: (parts: StepParts) => KindStep): void {
  if (kind === workflow.name || kind === map.name || ADDED.has(kind))
    throw new Error(`the ${kind} kind has a step already`);
  ADDED.set(kind, build);
}

export function kindSteps(f: FlushContext, budget: Budget): KindSteps {
  const steps = new Map<string, KindStep>();
  // A ready visit this flush has no room to start (bounded-work.ts): the next flush claims it, and those of every kind that starts runs.
  const defer = () => {
    for (const kind of steps.keys()) f.backlog.add(kind);
    f.work.startsLeft = 0;
  };
  const children = new Children(f, budget, steps, defer);
  const maps = new Maps(f, budget, children, defer);
  steps.set(workflow.name, children).set(map.name, maps);
  for (const [kind, build] of ADDED) steps.set(kind, build({ f, budget, children, defer }));
  return { steps, children, maps };
}
