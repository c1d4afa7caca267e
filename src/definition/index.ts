/** The workflow definition model: format, validation, expressions and the compiled graph. */
export {
  type CompiledPayload,
  type CompiledWhen,
  compilePayload,
  compileWhen,
  type ExpressionContext,
  ExpressionError,
  type NodeRead,
} from "./expressions.js";
export { type CompiledNode, compileGraph, type WorkflowGraph } from "./graph.js";
export { WORKFLOW_SCHEMA_ID, workflowJsonSchema, workflowJsonSchemaText } from "./json-schema.js";
export {
  BUILTIN_DEFAULTS,
  type NodeDefinition,
  type SuccessCase,
  type WorkflowDefaults,
  type WorkflowDefinition,
  WorkflowSchema,
} from "./schema.js";
export {
  parseWorkflowOrThrow,
  type ValidateOptions,
  type ValidationResult,
  validateWorkflow,
} from "./validate.js";
export type { NodeInput, WorkflowInput } from "./workflow-input.js";
