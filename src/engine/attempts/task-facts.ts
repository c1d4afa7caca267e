/**
 * What deciding a worker's result and counting its usage need of its run, kept from the claim
 * to the report: immutable, so a kept copy never goes stale; a task not kept (forgotten, or
 * claimed through another engine) reads its run.
 */
import { runOfExecution } from "../../core/attempt.js";
import { usageRuns } from "../../core/budget.js";
import { NotFoundError } from "../../errors.js";
import type { Store, VisitKey } from "../../store/store.js";
import type { ClaimedTask } from "../writer/inputs.js";
import type { ResultOf } from "./outcomes.js";

/** What is kept of a claimed task's run, and the tokens its claim took (of which attempt). */
type RunFacts = Pick<
  ClaimedTask,
  "run_id" | "input" | "trace_id" | "workflow_id" | "workflow_version" | "usage_runs" | "attempt" | "expected_tokens"
>;

/** Claimed tasks whose run facts are kept (the oldest are forgotten first; a miss reads the run). */
const FACTS_KEPT = 10_000;

export class TaskFacts {
  private readonly facts = new Map<string, RunFacts>();

  constructor(private readonly store: Store) {}

  remember(t: ClaimedTask): void {
    const { run_id, input, trace_id, workflow_id, workflow_version, usage_runs, attempt, expected_tokens } = t;
    const facts: RunFacts = { run_id, input, trace_id, workflow_id, workflow_version, usage_runs, attempt };
    if (expected_tokens !== undefined) facts.expected_tokens = expected_tokens;
    this.facts.set(t.execution_id, facts);
    if (this.facts.size > FACTS_KEPT) this.facts.delete(this.facts.keys().next().value as string);
  }

  /** The run of a task: kept from its claim, else read (null when it does not exist). */
  async runOf(
    executionId: string,
    runId: string,
  ): Promise<Pick<RunFacts, "run_id" | "input" | "trace_id" | "workflow_id" | "workflow_version"> | null> {
    return this.facts.get(executionId) ?? (await this.store.getRun(runId));
  }

  /** The runs a task's usage adds to: kept from its claim, else read (the chain never changes). */
  async usageRunsOf(executionId: string): Promise<string[]> {
    const kept = this.facts.get(executionId);
    if (kept) return kept.usage_runs;
    const runId = runOfExecution(executionId);
    const run = runId === null ? null : await this.store.getRun(runId);
    return run ? usageRuns(run) : [];
  }

  /**
   * The tokens the claim of this attempt took of its type's window (rates.ts), when this engine
   * made it and still keeps it; null otherwise (the report's flush works them out again).
   */
  expectedTokensOf(executionId: string, attempt: number): number | null {
    const kept = this.facts.get(executionId);
    return kept?.attempt === attempt ? (kept.expected_tokens ?? null) : null;
  }

  /** What deciding the edges of a result needs: the visit's run and workflow. */
  async taskOf(executionId: string, key: VisitKey, attempt: number): Promise<ResultOf> {
    const facts = await this.runOf(executionId, key.run_id);
    if (!facts) throw new NotFoundError(`no task ${executionId}; use the execution_id of a claimed task`);
    const { run_id, input, trace_id, workflow_id, workflow_version } = facts;
    return {
      run_id,
      input,
      trace_id,
      workflow_id,
      workflow_version,
      node_id: key.node_id,
      attempt,
      execution_id: executionId,
    };
  }
}
