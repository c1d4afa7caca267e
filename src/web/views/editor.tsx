/**
 * A workflow definition as JSON text in a code editor (editor/json-editor.tsx): checked as it is
 * typed (first as JSON here, then by the server's `POST /v1/workflows/validate`, which lists every
 * problem with its path), each problem marked in the text and listed under it, drawn as a graph
 * preview from the last text that parsed, and saved as a new version with PUT.
 */
import type { EditorView } from "@codemirror/view";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, api } from "../api.js";
import { ErrorNote, ProblemList } from "../components.js";
import { problemDiagnostics, syntaxDiagnostic } from "../editor/diagnostics.js";
import type { DiagnosticsFor } from "../editor/json-editor.js";
import { GraphView } from "../graph/graph-view.js";
import { workflowGraph } from "../graph/model.js";
import type { Problem, Registered, WorkflowCheck } from "../types.js";

/** CodeMirror, in its own chunk: loaded when an editor first shows, not with every page. */
type EditorModule = typeof import("../editor/json-editor.js");
let editorModule: Promise<EditorModule> | null = null;
const loadEditor = () => {
  editorModule ??= import("../editor/json-editor.js");
  return editorModule;
};

/** How long typing pauses before the server checks the text. */
const CHECK_AFTER_MS = 250;

type Parsed = { ok: true; value: unknown } | { ok: false; problem: Problem };

type Verdict =
  | { state: "checking" }
  | { state: "checked"; result: WorkflowCheck }
  | { state: "failed"; error: unknown }
  | { state: "not-json"; problem: Problem };

/** The problems' marks in the text, for the text the verdict is about (null: keep the marks). */
function diagnosticsOf(source: string, verdict: Verdict): DiagnosticsFor | null {
  if (verdict.state === "checked") {
    return { text: source, diagnostics: problemDiagnostics(source, verdict.result.errors, verdict.result.warnings) };
  }
  if (verdict.state === "not-json")
    return { text: source, diagnostics: [syntaxDiagnostic(source, verdict.problem.message)] };
  if (verdict.state === "failed") return { text: source, diagnostics: [] };
  return null;
}

/** A refused save: shown until the text changes. A save that worked is the parent's to announce. */
type Refused = { error: unknown } | null;

export function Editor(props: { initial: string; onSaved: (registered: Registered) => void }) {
  const [source, setSource] = useState(props.initial);
  const [verdict, setVerdict] = useState<Verdict>({ state: "checking" });
  const [refused, setRefused] = useState<Refused>(null);
  const [saving, setSaving] = useState(false);
  const view = useRef<EditorView | null>(null);
  const [code, setCode] = useState<EditorModule | { failed: unknown } | null>(null);
  useEffect(() => {
    loadEditor().then(setCode, (failed: unknown) => setCode({ failed }));
  }, []);
  const parsed = parse(source);
  const diagnostics = useMemo(() => diagnosticsOf(source, verdict), [source, verdict]);
  // The preview keeps the last definition that parsed, so a half-typed line does not blank it.
  const lastGood = useRef<unknown>(undefined);
  if (parsed.ok) lastGood.current = parsed.value;

  useEffect(() => {
    setVerdict({ state: "checking" });
    let stale = false;
    // Both checks wait for a pause in typing: half-typed text is not worth marking.
    const timer = setTimeout(() => {
      const current = parse(source);
      if (!current.ok) {
        setVerdict({ state: "not-json", problem: current.problem });
        return;
      }
      api<WorkflowCheck>("POST", "/v1/workflows/validate", current.value).then(
        (result) => stale || setVerdict({ state: "checked", result }),
        (error: unknown) => stale || setVerdict({ state: "failed", error }),
      );
    }, CHECK_AFTER_MS);
    return () => {
      stale = true;
      clearTimeout(timer);
    };
  }, [source]);

  const save = async () => {
    if (!parsed.ok) return;
    const id = (parsed.value as { id?: unknown } | null)?.id;
    setSaving(true);
    setRefused(null);
    try {
      if (typeof id !== "string" || id === "") {
        throw new ApiError(400, "validation", "The definition needs an id to be saved", [
          { path: "id", message: 'is required: a name like "order-approval"' },
        ]);
      }
      const registered = await api<Registered>("PUT", `/v1/workflows/${encodeURIComponent(id)}`, parsed.value);
      setSaving(false);
      props.onSaved(registered);
    } catch (error) {
      setRefused({ error });
      setSaving(false);
    }
  };

  return (
    <div class="editor">
      <div class="editor-text">
        <span class="field-label" aria-hidden="true">
          Definition (JSON)
        </span>
        {code && "JsonEditor" in code ? (
          <code.JsonEditor
            initial={props.initial}
            label="Definition (JSON)"
            viewRef={view}
            diagnostics={diagnostics}
            onChange={(text) => {
              setSource(text);
              setRefused(null);
            }}
          />
        ) : code ? (
          <ErrorNote error={code.failed} prefix="Could not load the editor" />
        ) : (
          <p class="muted json-editor-loading">Loading the editor…</p>
        )}
        <div class="actions">
          <button type="button" class="primary" disabled={!parsed.ok || saving} onClick={() => void save()}>
            Save as new version
          </button>
          <button
            type="button"
            disabled={!parsed.ok || !code || !("formatJson" in code)}
            title="Re-indent the JSON (Shift-Alt-F)"
            aria-keyshortcuts="Shift+Alt+F"
            onClick={() => view.current && code && "formatJson" in code && code.formatJson(view.current)}
          >
            Format
          </button>
          <VerdictLine verdict={verdict} />
        </div>
        {refused && <ErrorNote error={refused.error} prefix="Not saved" />}
        <section aria-label="validation">
          {verdict.state === "not-json" && <ProblemList problems={[verdict.problem]} kind="error" label="errors" />}
          {verdict.state === "checked" && (
            <>
              <ProblemList problems={verdict.result.errors} kind="error" label="errors" />
              <ProblemList problems={verdict.result.warnings} kind="warning" label="warnings" />
            </>
          )}
          {verdict.state === "failed" && <ErrorNote error={verdict.error} prefix="Could not check" />}
        </section>
      </div>
      <section class="editor-preview" aria-label="graph preview">
        <GraphView graph={workflowGraph(lastGood.current)} />
      </section>
    </div>
  );
}

function VerdictLine(props: { verdict: Verdict }) {
  const v = props.verdict;
  const [label, kind] =
    v.state === "checking"
      ? ["Checking…", "muted"]
      : v.state === "not-json"
        ? ["Not JSON", "bad"]
        : v.state === "failed"
          ? ["Could not check", "bad"]
          : v.result.ok
            ? [`Valid${v.result.warnings.length ? `, ${plural(v.result.warnings.length, "warning")}` : ""}`, "good"]
            : [plural(v.result.errors.length, "problem"), "bad"];
  return (
    <span class={`verdict ${kind}`} role="status" data-verdict={v.state === "checked" ? String(v.result.ok) : v.state}>
      {label}
    </span>
  );
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function parse(source: string): Parsed {
  try {
    return { ok: true, value: JSON.parse(source) as unknown };
  } catch (e) {
    return { ok: false, problem: { path: "(JSON)", message: (e as Error).message } };
  }
}
