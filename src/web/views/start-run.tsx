/**
 * Starts a run of a workflow's latest version. When the workflow's input_schema is an object of
 * plain fields (strings, numbers, booleans, enums) the input is a form of those fields;
 * otherwise it is JSON text. The server checks the input against the schema either way.
 */
import { useState } from "preact/hooks";
import { ApiError, api } from "../api.js";
import { ErrorNote } from "../components.js";
import { navigate } from "../route.js";
import type { Run } from "../types.js";

interface Field {
  name: string;
  type: "string" | "number" | "integer" | "boolean";
  required: boolean;
  options?: string[];
  description?: string;
}

export function StartRunForm(props: { workflowId: string; latestVersion: number; definition: unknown }) {
  const fields = formFields((props.definition as { input_schema?: unknown } | null)?.input_schema);
  const [values, setValues] = useState<Record<string, string | boolean>>({});
  const [source, setSource] = useState("{}");
  const [key, setKey] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const start = async () => {
    setBusy(true);
    setError(null);
    try {
      const input = fields ? inputOf(fields, values) : parseInput(source);
      const run = await api<Run>("POST", "/v1/runs", {
        workflow_id: props.workflowId,
        input,
        ...(key.trim() ? { idempotency_key: key.trim() } : {}),
      });
      navigate({ page: "run", runId: run.run_id });
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  };

  return (
    <form
      class="start-run"
      aria-label="start a run"
      onSubmit={(e) => {
        e.preventDefault();
        void start();
      }}
    >
      <p class="muted">Runs start with the latest version, v{props.latestVersion}.</p>
      {fields ? (
        fields.map((f) => (
          <FieldInput
            key={f.name}
            field={f}
            value={values[f.name]}
            onChange={(v) => setValues({ ...values, [f.name]: v })}
          />
        ))
      ) : (
        <label class="field">
          Input (JSON)
          <textarea
            name="input"
            class="code"
            rows={5}
            spellcheck={false}
            value={source}
            onInput={(e) => setSource(e.currentTarget.value)}
          />
        </label>
      )}
      <label class="field">
        Idempotency key (optional: the same key starts the run once)
        <input name="idempotency_key" value={key} onInput={(e) => setKey(e.currentTarget.value)} />
      </label>
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          Start run
        </button>
      </div>
      <ErrorNote error={error} prefix="Not started" />
    </form>
  );
}

function FieldInput(props: {
  field: Field;
  value: string | boolean | undefined;
  onChange: (v: string | boolean) => void;
}) {
  const { field: f } = props;
  const label = `${f.name}${f.required ? " *" : ""}${f.description ? ` (${f.description})` : ""}`;
  if (f.type === "boolean") {
    return (
      <label class="check">
        <input
          type="checkbox"
          name={f.name}
          checked={props.value === true}
          onChange={(e) => props.onChange(e.currentTarget.checked)}
        />{" "}
        {label}
      </label>
    );
  }
  if (f.options) {
    return (
      <label class="field">
        {label}
        <select name={f.name} value={String(props.value ?? "")} onChange={(e) => props.onChange(e.currentTarget.value)}>
          <option value="">(none)</option>
          {f.options.map((o) => (
            <option key={o} value={o}>
              {o}
            </option>
          ))}
        </select>
      </label>
    );
  }
  const value = String(props.value ?? "");
  const onInput = (e: { currentTarget: HTMLInputElement }) => props.onChange(e.currentTarget.value);
  return (
    // biome-ignore lint/a11y/noLabelWithoutControl: the input is inside, in either branch below.
    <label class="field">
      {label}
      {f.type === "string" ? (
        <input name={f.name} type="text" value={value} onInput={onInput} />
      ) : (
        <input name={f.name} type="number" step={f.type === "integer" ? "1" : "any"} value={value} onInput={onInput} />
      )}
    </label>
  );
}

/** The form's fields, or null when the schema is not an object of plain fields (then: JSON text). */
function formFields(schema: unknown): Field[] | null {
  if (typeof schema !== "object" || schema === null) return null;
  const { type, properties, required } = schema as { type?: unknown; properties?: unknown; required?: unknown };
  if (type !== "object" || typeof properties !== "object" || properties === null) return null;
  const requiredNames = Array.isArray(required) ? required : [];
  const fields: Field[] = [];
  for (const [name, property] of Object.entries(properties as Record<string, unknown>)) {
    const p = (property ?? {}) as { type?: unknown; enum?: unknown; description?: unknown };
    if (p.type !== "string" && p.type !== "number" && p.type !== "integer" && p.type !== "boolean") return null;
    const options = Array.isArray(p.enum) && p.enum.every((o) => typeof o === "string") ? p.enum : undefined;
    fields.push({
      name,
      type: p.type,
      required: requiredNames.includes(name),
      ...(options ? { options } : {}),
      ...(typeof p.description === "string" ? { description: p.description } : {}),
    });
  }
  return fields;
}

/** The input object of the form's values (empty fields left out); numbers checked here. */
function inputOf(fields: Field[], values: Record<string, string | boolean>): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  const problems = [];
  for (const f of fields) {
    const value = values[f.name];
    if (f.type === "boolean") {
      if (value !== undefined) input[f.name] = value === true;
      continue;
    }
    if (value === undefined || value === "") continue;
    if (f.type === "string") input[f.name] = value;
    else if (Number.isFinite(Number(value))) input[f.name] = Number(value);
    else problems.push({ path: `input.${f.name}`, message: "must be a number" });
  }
  if (problems.length > 0) throw new ApiError(400, "validation", "The input is invalid", problems);
  return input;
}

function parseInput(source: string): unknown {
  try {
    return JSON.parse(source) as unknown;
  } catch (e) {
    throw new ApiError(400, "validation", "The input is not JSON", [{ path: "input", message: (e as Error).message }]);
  }
}
