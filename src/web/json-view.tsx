/**
 * A JSON value as a tree: objects and arrays fold (a button with aria-expanded), keys and values
 * are styled by type, long strings wrap, and a "Copy" button puts the indented JSON on the
 * clipboard. Deep or large containers start folded. Every key and value is a text node.
 */
import { useState } from "preact/hooks";
import { json } from "./format.js";
import "./json-view.css";

/** Containers deeper than this start folded. */
const OPEN_DEPTH = 3;
/** Containers with more entries than this start folded (the root too). */
const OPEN_SIZE = 50;

export function JsonView(props: { value: unknown; openDepth?: number | undefined }) {
  const [copied, setCopied] = useState<"yes" | "no" | null>(null);
  const copy = () => {
    navigator.clipboard.writeText(json(props.value)).then(
      () => setCopied("yes"),
      () => setCopied("no"),
    );
  };
  return (
    <div class="json-view">
      <button type="button" class="json-copy" onClick={copy} onBlur={() => setCopied(null)}>
        {copied === "yes" ? "Copied" : copied === "no" ? "Copy failed" : "Copy"}
      </button>
      <pre class="json">
        <Entry label="value" value={props.value} depth={0} openDepth={props.openDepth ?? OPEN_DEPTH} last />
      </pre>
    </div>
  );
}

function Entry(props: {
  /** The key in an object (shown), or an array's index (only named on the fold button). */
  name?: string;
  label: string;
  value: unknown;
  depth: number;
  openDepth: number;
  last: boolean;
}) {
  const { name, value } = props;
  const comma = props.last ? "" : ",";
  const key = name === undefined ? null : <span class="json-key">{`${JSON.stringify(name)}: `}</span>;
  if (value === null || typeof value !== "object") {
    return (
      <span class="json-row">
        {key}
        <Scalar value={value} />
        {comma}
      </span>
    );
  }
  return <Container {...props} value={value} comma={comma} keyNode={key} />;
}

function Container(props: {
  label: string;
  value: object;
  depth: number;
  openDepth: number;
  comma: string;
  keyNode: preact.ComponentChild;
}) {
  const isArray = Array.isArray(props.value);
  const entries: [string, unknown][] = isArray
    ? (props.value as unknown[]).map((v, i) => [String(i), v])
    : Object.entries(props.value);
  const [open, setOpen] = useState(() => entries.length <= OPEN_SIZE && props.depth < props.openDepth);
  const [start, end] = isArray ? ["[", "]"] : ["{", "}"];
  if (entries.length === 0) {
    return (
      <span class="json-row">
        {props.keyNode}
        {`${start}${end}`}
        {props.comma}
      </span>
    );
  }
  const size = isArray
    ? `${entries.length} item${entries.length === 1 ? "" : "s"}`
    : `${entries.length} key${entries.length === 1 ? "" : "s"}`;
  return (
    <span class="json-row">
      <button
        type="button"
        class="json-toggle"
        aria-expanded={open}
        aria-label={`${props.label} (${size})`}
        onClick={() => setOpen(!open)}
      >
        {open ? "▾" : "▸"}
      </button>
      {props.keyNode}
      {open ? (
        <>
          {start}
          <span class="json-children">
            {entries.map(([k, v], i) => (
              <Entry
                key={k}
                {...(isArray ? {} : { name: k })}
                label={isArray ? `${props.label}[${k}]` : k}
                value={v}
                depth={props.depth + 1}
                openDepth={props.openDepth}
                last={i === entries.length - 1}
              />
            ))}
          </span>
          {end}
          {props.comma}
        </>
      ) : (
        <>
          {start}
          <span class="json-size">{` ${size} `}</span>
          {end}
          {props.comma}
        </>
      )}
    </span>
  );
}

function Scalar(props: { value: unknown }) {
  const v = props.value;
  if (v === null) return <span class="json-null">null</span>;
  switch (typeof v) {
    case "string":
      return <span class="json-string">{JSON.stringify(v)}</span>;
    case "number":
      return <span class="json-number">{String(v)}</span>;
    case "boolean":
      return <span class="json-boolean">{String(v)}</span>;
    default:
      return <span class="json-null">{String(v)}</span>;
  }
}
