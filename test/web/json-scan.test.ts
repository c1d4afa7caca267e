/** json-scan: a problem's path to its range in the text, and the path at the cursor in half-typed JSON. */
import { describe, expect, it } from "vitest";
import { problemRange, syntaxDiagnostic } from "../../src/web/editor/diagnostics.js";
import { contextAt, parsePath } from "../../src/web/editor/json-scan.js";

const TEXT = JSON.stringify(
  {
    id: "x",
    nodes: [
      { node_id: "a", agent_type: "echo" },
      { node_id: "b", agent_type: "echo", depends_on: ["a", "nope"], payload: { "dotted.key": 1 } },
    ],
  },
  null,
  2,
);
const at = (path: string) => {
  const r = problemRange(TEXT, path);
  return TEXT.slice(r.from, r.to);
};

describe("problem paths in the text", () => {
  it("parses paths", () => {
    expect(parsePath("nodes[1].depends_on[0]")).toEqual(["nodes", 1, "depends_on", 0]);
    expect(parsePath("(root)")).toEqual([]);
  });

  it("marks the value at the path, a container by its key, a missing member at its container", () => {
    expect(at("nodes[1].depends_on[1]")).toBe('"nope"');
    expect(at("nodes[0].agent_type")).toBe('"echo"');
    expect(at("nodes[1].depends_on")).toBe('"depends_on"');
    expect(at("nodes[1]")).toBe("{");
    expect(at("nodes[0].timeout")).toBe("{");
    expect(at("")).toBe("{");
  });

  it("marks a syntax error at the position the parser names", () => {
    const text = '{ "id": "x", }';
    let message = "";
    try {
      JSON.parse(text);
    } catch (e) {
      message = (e as Error).message;
    }
    const d = syntaxDiagnostic(text, message);
    expect(text.slice(d.from, d.to)).toBe("}");
  });
});

describe("the cursor's context", () => {
  it("knows a key of a node, inside a half-typed string", () => {
    const text = '{ "nodes": [ { "node_id": "a", "ret';
    expect(contextAt(text, text.length)).toMatchObject({ role: "key", path: ["nodes", 0], siblings: ["node_id"] });
  });

  it("knows a value's path, also after closed strings and nested containers", () => {
    const text = '{ "defaults": { "x": [1, {"y": "}"}] }, "nodes": [ {}, { "join": "a';
    expect(contextAt(text, text.length)).toMatchObject({ role: "value", path: ["nodes", 1, "join"] });
  });

  it("is nowhere after a finished value", () => {
    const text = '{ "id": "x" ';
    expect(contextAt(text, text.length)).toBeNull();
  });
});
