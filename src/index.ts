/** Skein's public surface. Anything not exported here is internal. */

export type { AgentHandler, DecideHook, Routed, Task } from "./agents/task.js";
export { canTransition, deriveRunStatus, type RunStatus, VISIT_STATES, type VisitState } from "./core/states.js";
export type {
  Json,
  MapCounts,
  MapItem,
  MapItemState,
  Run,
  RunEvent,
  RunParent,
  Visit,
  VisitError,
} from "./core/types.js";
export type { WorkflowDefinition } from "./definition/schema.js";
export { type ValidationResult, validateWorkflow } from "./definition/validate.js";
export { type Clock, ManualClock, systemClock } from "./engine/clock.js";
export {
  createClient,
  createEngine,
  Engine,
  type EngineOptions,
  type ListMapItemsOptions,
  type MapItemPage,
  type MapProgress,
  type NodeVisit,
  type PendingReview,
  type PruneOptions,
  type PublishEventAnswer,
  type RateLimit,
  type ReviewOptions,
  type RunWithNodes,
  type SendEventAnswer,
  type SendEventOptions,
  type StartRunOptions,
  type SubscribeFilter,
} from "./engine/engine.js";
export type { WorkerIdentity } from "./engine/external-requests.js";
export type { Notification, NotifyOptions } from "./engine/notifier.js";
export type { RegisteredWorkflow, WorkflowCheck } from "./engine/registry.js";
export type { Duration, RetentionOptions } from "./engine/retention.js";
export type { TaskLimits } from "./engine/task-limits.js";
export {
  ConflictError,
  DatabaseError,
  EngineClosedError,
  ForbiddenError,
  LimitError,
  NonRetryableError,
  NotFoundError,
  type Problem,
  SkeinError,
  UnavailableError,
  ValidationError,
} from "./errors.js";
export type { ChildRun, PrunedStatus } from "./store/store.js";
