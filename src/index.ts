/** Skein's public surface. Anything not exported here is internal. */

export { type AgentSchemas, defineAgent, type TypedAgentHandler } from "./agents/define-agent.js";
export type { StandardSchemaV1 } from "./agents/standard-schema.js";
export type { AgentHandler, DecideHook, DepResult, Routed, StepContext, Task } from "./agents/task.js";
export type { EgressOptions } from "./calls/egress.js";
export type { LlmOptions, LlmProvider } from "./calls/llm/providers.js";
export type { McpOptions, McpServerOption } from "./calls/mcp.js";
export { type Clock, ManualClock, systemClock, type TimerHandle } from "./clock.js";
export {
  canTransition,
  deriveRunStatus,
  type EndCause,
  type RunStatus,
  type RunStatusInput,
  VISIT_STATES,
  type VisitState,
} from "./core/states.js";
export type {
  Budget,
  Catchup,
  Compensation,
  EventType,
  FailedItem,
  Json,
  LiveEvent,
  MapCounts,
  MapItem,
  MapItemState,
  NewEvent,
  OnActive,
  Overlap,
  ProgressEvent,
  Reservation,
  Reservations,
  Run,
  RunEvent,
  RunFork,
  RunParent,
  RunPause,
  RunQueued,
  RunTags,
  RunTrigger,
  RunUsage,
  Schedule,
  ScheduleInput,
  TriggerRef,
  Usage,
  Visit,
  VisitError,
} from "./core/types.js";
export { defineWorkflow } from "./definition/define-workflow.js";
export type { SecretUse } from "./definition/expressions.js";
export type { WorkflowDefinition } from "./definition/schema.js";
export { type ValidateOptions, type ValidationResult, validateWorkflow } from "./definition/validate.js";
export type {
  AgentNodeInput,
  BuiltinKind,
  BuiltinNodeInput,
  BuiltinPayloads,
  CheckedNode,
  CheckedWorkflow,
  MapEachInput,
  NodeCommonInput,
  NodeInput,
  Template,
  ToolApproval,
  WorkflowInput,
} from "./definition/workflow-input.js";
export type {
  ClaimRequest,
  CompleteRequest,
  ExternalTask,
  FailRequest,
  HeartbeatRequest,
  ProgressRequest,
  RecordedStep,
  StepAnswer,
  StepRequest,
  WorkerIdentity,
} from "./engine/attempts/external-requests.js";
export type { SecretOption } from "./engine/attempts/secrets.js";
export type { TaskLimits } from "./engine/attempts/task-limits.js";
export type { BulkAction, BulkAnswer, BulkFilter, BulkOptions } from "./engine/bulk.js";
export { createClient, createEngine, Engine } from "./engine/engine.js";
export type {
  ClientOptions,
  EngineOptions,
  EventListener,
  ForkRunOptions,
  NodeVisit,
  OperatorOptions,
  PendingReview,
  PruneOptions,
  PutScheduleOptions,
  RateLimit,
  ReviewOptions,
  RunWithNodes,
  StartRunOptions,
  SubscribeFilter,
} from "./engine/engine-options.js";
export type { PublishEventOptions, SendEventOptions } from "./engine/events.js";
export type { ListMapItemsOptions, MapItemPage, MapProgress } from "./engine/map-items.js";
export type { ConversationMessage, ListMessagesOptions, MessagePage } from "./engine/messages.js";
export type { MigrateRunsAnswer, MigrateRunsOptions, Upgradable } from "./engine/migrate.js";
export type { ProgressStream } from "./engine/progress-read.js";
export type { RateLimitState } from "./engine/rate-states.js";
export type { RegisteredWorkflow, WorkflowCheck } from "./engine/registry.js";
export type { Duration, RetentionOptions } from "./engine/retention.js";
export type { ScheduleWithTimes } from "./engine/schedules.js";
export type { Notification, NotifyOptions } from "./engine/telemetry/notifier.js";
export type { NodeWaiting } from "./engine/waiting.js";
export type { PublishEventAnswer, ReportAnswer, SendEventAnswer, TriggerRefusal } from "./engine/writer/inputs.js";
export {
  ConflictError,
  DatabaseError,
  EngineClosedError,
  ForbiddenError,
  LimitError,
  NonRetryableError,
  NotFoundError,
  type Problem,
  RetryableError,
  SkeinError,
  type SkeinErrorCode,
  UnavailableError,
  ValidationError,
} from "./errors.js";
export type { ChildRun, PrunedStatus, RunFilter, ScheduleFilter, StepRow } from "./store/store.js";
export type { AgentCall } from "./testing/agent-activity.js";
export { type FakeAgent, type FakeCall, type FakeOutput, fake } from "./testing/fakes.js";
export { createTestEngine, TestEngine, type TestEngineOptions } from "./testing/test-engine.js";
