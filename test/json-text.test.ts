/** Strict JSON text (src/json-text.ts): what JSON.parse would silently change is refused with its place. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { joinPath } from "../src/definition/path.js";
import { ValidationError } from "../src/errors.js";
import { firstInvalidUtf8, parseJsonText } from "../src/json-text.js";

function problems(text: string | Buffer): { path: string; message: string }[] {
  try {
    parseJsonText(text, { what: "The text", base: "body" });
  } catch (e) {
    if (e instanceof ValidationError) return e.problems;
    throw e;
  }
  return [];
}

describe("parseJsonText", () => {
  it("returns what JSON.parse returns for ordinary text, a BOM aside", () => {
    const text = '{"a": [1, -2.5, 9007199254740991, "12345678901234567890", true, null], "b": {"c": "é"}}';
    expect(parseJsonText(text, { what: "x" })).toEqual(JSON.parse(text));
    expect(parseJsonText(`\uFEFF${text}`, { what: "x" })).toEqual(JSON.parse(text));
    expect(parseJsonText(Buffer.from(text), { what: "x" })).toEqual(JSON.parse(text));
  });

  it("names the path of every unsafe integer, through escaped and odd keys", () => {
    const text = '{"a\\"b": [0, {"x.y": 9007199254740992}], "ok": 1, "c\\\\": -99999999999999999999}';
    expect(problems(text)).toEqual([
      { path: 'body["a\\"b"][1]["x.y"]', message: expect.stringContaining("the integer 9007199254740992") },
      { path: 'body["c\\\\"]', message: expect.stringContaining("the integer -99999999999999999999") },
    ]);
  });

  it("accepts float literals (rounded as floats are) unless they overflow to Infinity", () => {
    expect(problems('{"a": 1e20, "b": 12345678901234567890.5, "c": 6.02e23, "d": 1e-400}')).toEqual([]);
    expect(problems("[1e309, 1.7976931348623157e308]")).toEqual([
      { path: "body[0]", message: expect.stringContaining("beyond the range of a 64-bit float") },
    ]);
  });

  it("refuses __proto__ keys and constructor.prototype, but not a constructor key alone", () => {
    expect(problems('{"constructor": {"name": 1}}')).toEqual([]);
    expect(problems('{"a": {"constructor": {"prototype": {}}}}')).toEqual([
      { path: "body.a.constructor.prototype", message: expect.stringContaining("prototype poisoning") },
    ]);
    expect(problems('[{"__proto__": 1}]').map((p) => p.path)).toEqual(["body[0].__proto__"]);
  });

  it("stops collecting after 20 problems, so hostile text costs one pass", () => {
    const text = `[${Array.from({ length: 1000 }, () => "99999999999999999999").join(",")}]`;
    expect(problems(text)).toHaveLength(20);
  });

  it("reports a syntax error with its line and column", () => {
    expect(problems('{\n  "a": ]\n}')).toEqual([
      { path: "body", message: expect.stringContaining("line 2, column 8") },
    ]);
  });
});

describe("firstInvalidUtf8", () => {
  it("finds truncated, overlong, surrogate and out-of-range sequences", () => {
    const at = (...bytes: number[]) => firstInvalidUtf8(Uint8Array.from(bytes));
    expect(at(0x61, 0xc3, 0xa9, 0x62)).toBe(4); // valid: "aéb"
    expect(at(0x61, 0xc3)).toBe(1); // truncated
    expect(at(0x61, 0xc0, 0xaf)).toBe(1); // overlong "/"
    expect(at(0xe0, 0x80, 0xaf)).toBe(0); // overlong 3-byte
    expect(at(0x61, 0xed, 0xa0, 0x80)).toBe(1); // a UTF-16 surrogate
    expect(at(0xf4, 0x90, 0x80, 0x80)).toBe(0); // past U+10FFFF
    expect(at(0xf0, 0x9f, 0x98, 0x80, 0xff)).toBe(4); // an emoji, then a stray byte
  });
});

describe("parseJsonText against JSON.parse (property)", () => {
  it("returns JSON.parse's value for any JSON text without unsafe integers or __proto__ keys", () => {
    // fc.jsonValue makes doubles such as -2^53, which JSON.stringify writes as integer literals: refused, so left out.
    const safe = fc.jsonValue().filter((v) => {
      const text = JSON.stringify(v);
      return !text.includes('"__proto__"') && !/\d{16}/.test(text);
    });
    fc.assert(
      fc.property(safe, (value) => {
        const text = JSON.stringify(value);
        expect(parseJsonText(text, { what: "x" })).toEqual(JSON.parse(text));
      }),
      { numRuns: 500 },
    );
  });

  it("finds an unsafe integer wherever it is put, with the path of its place", () => {
    const key = fc.string().filter((k) => !["__proto__", "prototype", "constructor"].includes(k));
    fc.assert(
      fc.property(fc.array(key, { minLength: 1, maxLength: 4 }), fc.bigInt(2n ** 53n, 2n ** 80n), (keys, n) => {
        const text = keys.reduceRight((inner, k) => `{${JSON.stringify(k)}: [${inner}]}`, n.toString());
        const path = keys.reduce((p, k) => joinPath(joinPath(p, k), 0), "body");
        expect(problems(text)).toEqual([{ path, message: expect.stringContaining(`the integer ${n} `) }]);
      }),
      { numRuns: 300 },
    );
  });
});
