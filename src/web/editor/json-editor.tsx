/**
 * A CodeMirror 6 editor for a workflow definition: JSON syntax highlighting (by classes, styled
 * in json-editor.css from the page's colour variables), completion and hover docs from the
 * schema (schema-help), lint diagnostics given by the parent, and Format (Shift-Alt-F).
 *
 * CSP: CodeMirror's own styles go through adoptedStyleSheets (CSSOM, allowed by style-src
 * 'self'), and it writes the DOM through text nodes and element properties, never innerHTML.
 * Tab is left to move focus (no indentWithTab), so the editor is no keyboard trap.
 */
import {
  autocompletion,
  closeBrackets,
  closeBracketsKeymap,
  completionKeymap,
  completionStatus,
} from "@codemirror/autocomplete";
import { defaultKeymap, history, historyKeymap } from "@codemirror/commands";
import { json } from "@codemirror/lang-json";
import { bracketMatching, indentOnInput, syntaxHighlighting } from "@codemirror/language";
import { type Diagnostic, setDiagnostics } from "@codemirror/lint";
import { EditorState } from "@codemirror/state";
import { drawSelection, EditorView, highlightActiveLine, keymap, lineNumbers } from "@codemirror/view";
import { classHighlighter } from "@lezer/highlight";
import type { Ref } from "preact";
import { useEffect, useRef } from "preact/hooks";
import { schemaCompletions, schemaHover } from "./schema-help.js";
import "./json-editor.css";

/** Re-indents the document (2 spaces) when it is JSON. false: it is not, nothing changed. */
export function formatJson(view: EditorView): boolean {
  const text = view.state.doc.toString();
  let formatted: string;
  try {
    formatted = JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return false;
  }
  if (formatted !== text) {
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: formatted }, userEvent: "format" });
  }
  return true;
}

/** Diagnostics for one exact text: applied only while the editor still holds that text. */
export interface DiagnosticsFor {
  text: string;
  diagnostics: Diagnostic[];
}

export function JsonEditor(props: {
  initial: string;
  /** The accessible name of the editable area. */
  label: string;
  onChange: (text: string) => void;
  diagnostics: DiagnosticsFor | null;
  viewRef?: Ref<EditorView | null>;
}) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const onChange = useRef(props.onChange);
  onChange.current = props.onChange;
  // Diagnostics that came while a completion list was open: applied when it closes, as a
  // transaction under the list could make Enter miss the option it was meant to accept.
  const pending = useRef<DiagnosticsFor | null>(null);

  // The editor is created once per mount: `initial` seeds it, the parent reads it via onChange.
  useEffect(() => {
    if (!host.current) return;
    const editor = new EditorView({
      parent: host.current,
      state: EditorState.create({
        doc: props.initial,
        extensions: [
          lineNumbers(),
          history(),
          drawSelection(),
          indentOnInput(),
          bracketMatching(),
          closeBrackets(),
          highlightActiveLine(),
          json(),
          syntaxHighlighting(classHighlighter),
          autocompletion({ override: [schemaCompletions], icons: false }),
          schemaHover,
          keymap.of([
            { key: "Shift-Alt-f", run: formatJson, preventDefault: true },
            ...closeBracketsKeymap,
            ...defaultKeymap,
            ...historyKeymap,
            ...completionKeymap,
          ]),
          // tabindex: the editable area is the scroller's focusable content, which axe (and some
          // assistive tools) do not count a contenteditable alone as; it is the same one tab stop.
          EditorView.contentAttributes.of({ "aria-label": props.label, spellcheck: "false", tabindex: "0" }),
          EditorView.updateListener.of((update) => {
            if (update.docChanged) onChange.current(update.state.doc.toString());
            if (pending.current && completionStatus(update.state) === null) {
              const waiting = pending.current;
              pending.current = null;
              queueMicrotask(() => apply(update.view, waiting));
            }
          }),
        ],
      }),
    });
    view.current = editor;
    setRef(props.viewRef, editor);
    return () => {
      setRef(props.viewRef, null);
      view.current = null;
      editor.destroy();
    };
  }, []);

  const diagnostics = props.diagnostics;
  useEffect(() => {
    const editor = view.current;
    if (!editor || !diagnostics) return;
    if (completionStatus(editor.state) === null) apply(editor, diagnostics);
    else pending.current = diagnostics;
  }, [diagnostics]);

  return <div class="json-editor" ref={host} />;
}

function apply(view: EditorView, given: DiagnosticsFor): void {
  if (view.state.doc.toString() === given.text) view.dispatch(setDiagnostics(view.state, given.diagnostics));
}

function setRef<T>(ref: Ref<T> | undefined, value: T): void {
  if (typeof ref === "function") ref(value);
  else if (ref) ref.current = value;
}
