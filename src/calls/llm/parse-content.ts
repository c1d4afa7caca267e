/**
 * `output.parsed` of an llm node whose `response_format` asks for JSON: the content parsed, and
 * checked with ajv against a `json_schema`'s schema. A model that answers badly may answer well
 * the next time, so both failures are retryable; a schema ajv cannot compile is the workflow's
 * mistake, and not retried.
 */
import type { Ajv, ErrorObject, ValidateFunction } from "ajv";
import type { Json } from "../../core/types.js";
import type { ResponseFormat } from "../../definition/kinds/llm.js";
import { NonRetryableError, RetryableError } from "../../errors.js";

/** Compiled schemas by their JSON text: a workflow's few schemas are compiled once. */
export class ContentParser {
  private ajv: Ajv | null = null;
  private readonly compiled = new Map<string, ValidateFunction>();

  /** `parsed`: null for text; the JSON value for json_object and json_schema (checked against its schema). */
  async parse(format: ResponseFormat | undefined, content: string): Promise<Json> {
    if (format === undefined || format.type === "text") return null;
    const value = parseJson(content, format);
    if (format.type === "json_object") return value;
    const validate = await this.validator(format.json_schema.schema);
    if (validate(value)) return value;
    throw new RetryableError(
      `the model's JSON does not match the schema "${format.json_schema.name}": ${describe(validate.errors ?? [])}`,
    );
  }

  private async validator(schema: Record<string, Json>): Promise<ValidateFunction> {
    const key = JSON.stringify(schema);
    const known = this.compiled.get(key);
    if (known) return known;
    if (!this.ajv) {
      const { Ajv } = await import("ajv");
      this.ajv = new Ajv({ allErrors: true, strict: false });
    }
    let validate: ValidateFunction;
    try {
      validate = this.ajv.compile(schema);
    } catch (e) {
      throw new NonRetryableError(
        `response_format.json_schema.schema is not a valid JSON Schema: ${(e as Error).message}`,
      );
    }
    if (this.compiled.size >= 100) this.compiled.clear();
    this.compiled.set(key, validate);
    return validate;
  }
}

/** The content as JSON; a fence of ```json around it (some local models add one) is taken off. */
function parseJson(content: string, format: ResponseFormat): Json {
  const fenced = /^\s*```(?:json)?\s*\n([\s\S]*?)\n\s*```\s*$/.exec(content);
  const text = fenced ? (fenced[1] as string) : content;
  try {
    return JSON.parse(text) as Json;
  } catch (e) {
    const start = content.length > 80 ? `${content.slice(0, 77)}...` : content;
    throw new RetryableError(
      `the model's content is not JSON, as response_format ${format.type} asks (${(e as Error).message}); it began ${JSON.stringify(start)}`,
    );
  }
}

/** The first few of ajv's errors, each with where it is (`/category`) and what the schema wanted. */
function describe(errors: ErrorObject[]): string {
  const shown = errors.slice(0, 3).map((err) => {
    const where = err.instancePath === "" ? "the value" : err.instancePath;
    const allowed = (err.params as { allowedValues?: unknown }).allowedValues;
    return `${where} ${err.message ?? "is invalid"}${Array.isArray(allowed) ? ` (${allowed.map((a) => JSON.stringify(a)).join(", ")})` : ""}`;
  });
  const more = errors.length > 3 ? `; and ${errors.length - 3} more` : "";
  return `${shown.join("; ")}${more}`;
}
