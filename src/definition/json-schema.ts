/**
 * The published JSON Schema of the workflow format, generated from `WorkflowSchema` so editors
 * and other languages check definitions by the same rules (DESIGN §2). Graph rules (cycles,
 * references) are beyond JSON Schema and only `validateWorkflow` checks them.
 */
import { z } from "zod";
import { WorkflowSchema } from "./schema.js";

// A URN, not a URL: the project has no published schema address yet.
export const WORKFLOW_SCHEMA_ID = "urn:skein:schema:workflow";

/** The JSON Schema (draft 2020-12) of a workflow definition as written (defaults optional). */
export function workflowJsonSchema(): Record<string, unknown> {
  const generated = z.toJSONSchema(WorkflowSchema, { io: "input", target: "draft-2020-12" });
  const { $schema, ...rest } = generated as Record<string, unknown>;
  return {
    $schema,
    $id: WORKFLOW_SCHEMA_ID,
    title: "Skein workflow definition",
    ...rest,
  };
}

/** The committed file's exact text: 2-space JSON with a trailing newline. */
export function workflowJsonSchemaText(): string {
  return `${JSON.stringify(workflowJsonSchema(), null, 2)}\n`;
}
