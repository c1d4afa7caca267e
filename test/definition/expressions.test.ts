import jsonata from "jsonata";
import { describe, expect, it } from "vitest";
import {
  type CompiledPayload,
  type CompiledWhen,
  compilePayload,
  compileWhen,
  type ExpressionContext,
  ExpressionError,
} from "../../src/definition/index.js";
import { EXPRESSION_LIMITS } from "../../src/definition/sandbox.js";

const ctx: ExpressionContext = {
  input: { topic: "rust", count: 3, tags: ["a", "b"], nested: { deep: true } },
  nodes: {
    fetch: { output: { items: [1, 2, 3], title: "T" }, status: "SUCCEEDED", error: null },
    other: null,
  },
  run: { run_id: "run_1", trace_id: "trace_1" },
  output: { ok: true, score: 0.4, list: [], name: "" },
  self: { execution_id: "exec_1" },
};

function template(payload: unknown): CompiledPayload {
  const { template, problems } = compilePayload(payload, "nodes[0].payload");
  expect(problems).toEqual([]);
  if (!template) throw new Error("expected a template");
  return template;
}

function when(expr: string): CompiledWhen {
  const { when, problems } = compileWhen(expr, "nodes[0].next_on_success[0].when");
  expect(problems).toEqual([]);
  if (!when) throw new Error("expected a condition");
  return when;
}

describe("compilePayload", () => {
  it("returns no template for a payload without templates (the engine skips evaluation)", () => {
    expect(compilePayload({ a: 1, b: ["x", { c: "no {braces} here" }] }, "p")).toEqual({
      template: null,
      problems: [],
    });
    expect(compilePayload({}, "p").template).toBeNull();
  });

  it("replaces a whole-string template by a typed value", async () => {
    const t = template({
      n: "{{ input.count }}",
      list: " {{ nodes.fetch.output.items }} ",
      obj: "{{ input.nested }}",
      b: "{{ input.count > 2 }}",
    });
    expect(await t.resolve(ctx)).toEqual({ n: 3, list: [1, 2, 3], obj: { deep: true }, b: true });
  });

  it("interpolates templates inside text, JSON-stringifying non-strings", async () => {
    const t = template({ s: "topic={{ input.topic }} n={{input.count}} tags={{ input.tags }} run {{ run.run_id }}" });
    expect(await t.resolve(ctx)).toEqual({ s: 'topic=rust n=3 tags=["a","b"] run run_1' });
  });

  it("resolves nested objects and arrays and keeps literals", async () => {
    const t = template({
      keep: { x: 1 },
      deep: [{ title: "{{ nodes.fetch.output.title }}", fixed: [true, null] }],
      self: "{{ self.execution_id }}",
    });
    expect(await t.resolve(ctx)).toEqual({
      keep: { x: 1 },
      deep: [{ title: "T", fixed: [true, null] }],
      self: "exec_1",
    });
  });

  it("returns a new value each time, not the definition's objects", async () => {
    const payload = { keep: { x: 1 }, t: "{{ input.tags }}" };
    const t = template(payload);
    const first = (await t.resolve(ctx)) as { keep: { x: number }; t: string[] };
    first.keep.x = 99;
    first.t.push("c");
    expect(payload.keep.x).toBe(1);
    expect((ctx.input as { tags: string[] }).tags).toEqual(["a", "b"]);
    expect(await t.resolve(ctx)).toEqual({ keep: { x: 1 }, t: ["a", "b"] });
  });

  it("resolves a missing value to null as a whole and to empty text inside text", async () => {
    const t = template({ whole: "{{ input.missing }}", text: "[{{ nodes.other.output }}]" });
    expect(await t.resolve(ctx)).toEqual({ whole: null, text: "[]" });
  });

  it("turns a JSONata sequence into a plain array", async () => {
    const value = (await template({ v: "{{ nodes.fetch.output.items.($ * 2) }}" }).resolve(ctx)) as { v: number[] };
    expect(value.v).toEqual([2, 4, 6]);
    expect(Object.keys(value.v)).toEqual(["0", "1", "2"]);
  });

  it("lists the nodes templates read, with where", () => {
    const t = template({
      a: "{{ nodes.fetch.output }}",
      b: ["x {{ $$.nodes.`other-x`.status }} {{ nodes.fetch.error }}"],
      c: "{{ $count(nodes.*) }}",
    });
    expect(t.readsNodes).toEqual(["fetch", "other-x"]);
    expect(t.reads).toEqual([
      { path: "nodes[0].payload.a", node_id: "fetch" },
      { path: "nodes[0].payload.b[0]", node_id: "other-x" },
      { path: "nodes[0].payload.b[0]", node_id: "fetch" },
    ]);
  });

  it("reports parse errors with the path of the string", () => {
    const { template, problems } = compilePayload(
      { ok: "{{ input.a }}", items: [{ topic: "{{ input.( }}" }], "odd key": "{{ 1 + }}" },
      "nodes[2].payload",
    );
    expect(template).toBeNull();
    expect(problems.map((p) => p.path)).toEqual(["nodes[2].payload.items[0].topic", 'nodes[2].payload["odd key"]']);
    expect(problems[0]?.message).toMatch(/^cannot parse "input\.\(": /);
  });

  it("rejects with an error naming the expression and the cause at run time", async () => {
    const t = template({ x: "{{ input.topic + 1 }}" });
    const error = await t.resolve(ctx).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ExpressionError);
    expect((error as Error).message).toContain('expression "input.topic + 1" at nodes[0].payload.x failed');
    expect((error as Error).message).toContain("must evaluate to a number");
  });

  it("rejects a result that is not JSON", async () => {
    await expect(template({ f: "{{ function($x) { $x } }}" }).resolve(ctx)).rejects.toThrow(/not a JSON value/);
    await expect(template({ f: "{{ 1 / 0 }}" }).resolve(ctx)).rejects.toThrow(/not a JSON number/);
  });

  it("stops runaway recursion instead of hanging", async () => {
    const t = template({ x: "{{ ($f := function($n) { $f($n + 1) }; $f(0)) }}" });
    await expect(t.resolve(ctx)).rejects.toThrow(ExpressionError);
  });
});

describe("compileWhen", () => {
  it("tests conditions against the visit's output", async () => {
    expect(await when("output.ok = true").test(ctx)).toBe(true);
    expect(await when("output.score > 0.5").test(ctx)).toBe(false);
    expect(await when("nodes.fetch.status = 'SUCCEEDED' and input.topic = 'rust'").test(ctx)).toBe(true);
  });

  it("casts results with JSONata's $boolean rules; nothing is false", async () => {
    const cases: [string, boolean][] = [
      ["output.name", false], // ""
      ["input.topic", true], // non-empty string
      ["output.score", true], // non-zero number
      ["0", false],
      ["output.list", false], // []
      ["input.tags", true], // non-empty array of truthy strings
      ["[0, '']", false], // array whose members are all falsy
      ["input.nested", true], // non-empty object
      ["{}", false],
      ["null", false],
      ["input.missing", false], // undefined
      ["nodes.other", false], // null node
    ];
    for (const [expr, expected] of cases) expect([expr, await when(expr).test(ctx)]).toEqual([expr, expected]);
  });

  it("lists the nodes a condition reads", () => {
    expect(when("nodes.a.output.x > 1 and $.nodes.b.status = 'FAILED' or output.ok").readsNodes).toEqual(["a", "b"]);
  });

  it("reports parse errors at the path of the condition", () => {
    const { when, problems } = compileWhen("output.ok = ", "nodes[3].next_on_success[0].when");
    expect(when).toBeNull();
    expect(problems).toHaveLength(1);
    expect(problems[0]?.path).toBe("nodes[3].next_on_success[0].when");
    expect(problems[0]?.message).toContain('cannot parse "output.ok ="');
  });

  it("rejects when the condition throws", async () => {
    await expect(when("$number('abc') > 1").test(ctx)).rejects.toThrow(
      /expression "\$number\('abc'\) > 1" at nodes\[0\]\.next_on_success\[0\]\.when failed/,
    );
  });
});

describe("the expression sandbox (function calls, regexes, ranges)", () => {
  it("keeps JSONata's meaning: context arguments, ~>, lambdas, regexes, $pad and $join", async () => {
    const t = template({
      padded: "{{ input.tags.$pad(3) }}",
      piped: '{{ input.tags ~> $join("-") }}',
      upper: "{{ $map(input.tags, function($v) { $uppercase($v) }) }}",
      replaced: '{{ $replace(input.topic, /u/, "U") }}',
      left: '{{ $pad("x", -3, "#") }}',
      count: "{{ $count(nodes.fetch.output.items) }}",
    });
    expect(await t.resolve(ctx)).toEqual({
      padded: ["a  ", "b  "],
      piped: "a-b",
      upper: ["A", "B"],
      replaced: "rUst",
      left: "##x",
      count: 3,
    });
  });

  it("refuses to make a string or a list past its size limits, before making it", async () => {
    await expect(template({ x: '{{ $pad("", 20000000) }}' }).resolve(ctx)).rejects.toThrow(
      /\$pad width 20000000 is over the limit of 10000000 characters/,
    );
    await expect(template({ x: "{{ $count([1..2000000]) }}" }).resolve(ctx)).rejects.toThrow(
      /a list of 2000000 items is over the limit of 1000000/,
    );
    await expect(template({ x: '{{ ($s := $pad("", 6000000); $join([$s, $s])) }}' }).resolve(ctx)).rejects.toThrow(
      /\$join would make \d+ characters, over the limit/,
    );
    // One long string referenced 100 times: small in memory, 900 MB as JSON text.
    await expect(
      template({ x: '{{ ($s := $pad("", 9000000); $string([1..100].($s))) }}' }).resolve(ctx),
    ).rejects.toThrow(/\$string would make more than 10000000 characters/);
    expect(await template({ x: '{{ $string({"a": [1, "b"]}) }}' }).resolve(ctx)).toEqual({ x: '{"a":[1,"b"]}' });
  });

  it("holds paths and constructors in this thread to the same size limits", async () => {
    const big = { ...ctx, input: { a: Array.from({ length: 600_000 }, (_, i) => i) } };
    await expect(template({ x: "{{ $$.input.a }}" }).resolve(big)).resolves.toEqual({ x: big.input.a });
    await expect(template({ x: "{{ [input.a, input.a] }}" }).resolve(big)).rejects.toThrow(
      /a list of 1200000 items is over the limit of 1000000/,
    );
  });

  it("refuses $eval and reserved names when the expression is parsed", () => {
    const { problems } = compilePayload(
      { a: "{{ $eval(input.code) }}", b: "{{ input.`__proto__` }}", c: "{{ ($f := $eval; $f('1')) }}" },
      "p",
    );
    expect(problems).toEqual([
      { path: "p.a", message: expect.stringContaining("$eval, which is not available") },
      { path: "p.b", message: expect.stringContaining('reads "__proto__"') },
      { path: "p.c", message: expect.stringContaining("$eval, which is not available") },
    ]);
  });
});

describe("a template that is a plain path", () => {
  // Read without JSONata where every value on the way is an object: each case must give what
  // JSONata gives (a whole-string template's undefined is null).
  const data: Record<string, unknown> = {
    input: { a: { b: [1, 2] }, list: [{ x: 1 }, { x: 2 }], one: [{ x: 5 }], n: null, s: "str", z: 0, e: [] },
    item: [5],
    index: 0,
    nodes: { plan: { output: { items: [[1, 2]] }, status: "SUCCEEDED", error: null }, other: null },
    run: { run_id: "r", trace_id: "t" },
  };
  const paths = [
    "input",
    "input.a",
    "input.a.b",
    "input.list.x",
    "input.one.x",
    "input.n",
    "input.n.x",
    "input.s.length",
    "input.z",
    "input.e",
    "input.missing",
    "input.missing.deeper",
    "item",
    "index",
    "nodes.plan.output.items",
    "nodes.other.output",
    "run.run_id",
    "`input`.a",
  ];
  it.each(paths)("%s gives what JSONata gives", async (path) => {
    const jsonataValue = await jsonata(path).evaluate(data);
    const expected = JSON.parse(JSON.stringify(jsonataValue ?? null));
    expect(await template({ v: `{{ ${path} }}` }).resolve(data as unknown as ExpressionContext)).toEqual({
      v: expected,
    });
  });

  it("keeps JSONata's size limit on the value it reads", async () => {
    const big = { ...data, input: { list: Array.from({ length: EXPRESSION_LIMITS.maxItems + 1 }, () => 0) } };
    await expect(template({ v: "{{ input.list }}" }).resolve(big as unknown as ExpressionContext)).rejects.toThrow(
      /over the limit/,
    );
  });
});
