/**
 * @internal The code of the expression sandbox's worker thread (sandbox.ts), as plain CommonJS
 * so the worker needs no TypeScript loader (as the SQLite checkpointer's).
 *
 * It evaluates one expression at a time with JSONata and the limits that keep one evaluation
 * from taking the process down: `$eval` is removed (data must not become code); `$pad`, `$join`
 * and `$string` refuse to make a string over `maxChars` before making it (V8 aborts the whole process,
 * not only this thread, when one built-in call allocates past the heap limit); and every value
 * a step makes is checked (strings up to `maxChars`, arrays up to `maxItems`), so no later step
 * builds on an oversized one. Time is bounded by the parent, which terminates this thread.
 */
export const SANDBOX_WORKER_SOURCE = `
"use strict";
const { parentPort, workerData } = require("node:worker_threads");
const jsonata = require(workerData.module);
const { maxChars, maxItems, guardrails } = workerData.limits;

function limitError(message) {
  return { code: "limit", message };
}

const compiled = new Map();
let originals = null;

async function builtIns() {
  if (originals) return originals;
  const fn = async (name) => (await jsonata("$" + name).evaluate({})).implementation;
  originals = { pad: await fn("pad"), join: await fn("join"), string: await fn("string") };
  return originals;
}

function codePoints(s) {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

async function compile(source) {
  let expr = compiled.get(source);
  if (expr) return expr;
  const o = await builtIns();
  expr = jsonata(source, guardrails);
  expr.registerFunction("eval", () => {
    throw limitError("$eval is not available: it would run data as code");
  });
  expr.registerFunction("pad", (str, width, char) => {
    if (Math.abs(Math.trunc(width)) > maxChars) {
      throw limitError("$pad width " + width + " is over the limit of " + maxChars + " characters");
    }
    return o.pad(str, width, char);
  }, "<s-ns?:s>");
  expr.registerFunction("join", (strs, separator) => {
    if (Array.isArray(strs)) {
      let total = 0;
      for (const s of strs) total += typeof s === "string" ? s.length : 0;
      total += Math.max(0, strs.length - 1) * (typeof separator === "string" ? separator.length : 0);
      if (total > maxChars) {
        throw limitError("$join would make " + total + " characters, over the limit of " + maxChars);
      }
    }
    return o.join(strs, separator);
  }, "<a<s>s?:s>");
  // A list of many references to one long string is small in memory but huge as JSON text: its
  // length is counted first, for a clear refusal rather than running out of this thread's heap.
  expr.registerFunction("string", function (arg, prettify) {
    if (arg !== null && typeof arg === "object" && jsonLengthOver(arg, maxChars)) {
      throw limitError("$string would make more than " + maxChars + " characters");
    }
    return o.string.call(this, arg, prettify);
  }, "<x-b?:s>");
  // Every value a step makes is checked (a Symbol key: only assign() binds it, not evaluate's bindings).
  expr.assign(Symbol.for("jsonata.__evaluate_exit"), (_expr, _input, _env, result) => checkSize(result));
  if (compiled.size > 1000) compiled.clear();
  compiled.set(source, expr);
  return expr;
}

/** True when the JSON text of value is longer than max (counted roughly, without making it). */
function jsonLengthOver(value, max) {
  let total = 0;
  const stack = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "string") total += v.length + 2;
    else if (v === null || typeof v !== "object") total += 24;
    else if (Array.isArray(v)) {
      total += v.length + 2;
      for (const item of v) stack.push(item);
    } else {
      for (const [k, item] of Object.entries(v)) {
        total += k.length + 4;
        stack.push(item);
      }
    }
    if (total > max) return true;
  }
  return false;
}

function checkSize(value) {
  if (typeof value === "string" && value.length > maxChars) {
    throw limitError("a string of " + value.length + " characters is over the limit of " + maxChars);
  }
  if (Array.isArray(value) && value.length > maxItems) {
    throw limitError("a list of " + value.length + " items is over the limit of " + maxItems);
  }
}

function toJson(value) {
  if (value === undefined || value === null) return value;
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      if (!Number.isFinite(value)) throw new Error("the result " + value + " is not a JSON number");
      return value;
    case "object": {
      if (Array.isArray(value)) return value.map((v) => { const j = toJson(v); return j === undefined ? null : j; });
      if ("_jsonata_lambda" in value || "_jsonata_function" in value) throw new Error("the result is a function, not a JSON value");
      const out = {};
      for (const [k, v] of Object.entries(value)) {
        const j = toJson(v);
        if (j !== undefined) out[k] = j;
      }
      return out;
    }
    default:
      throw new Error("the result is a " + typeof value + ", not a JSON value");
  }
}

parentPort.on("message", async ({ id, source, context, secrets }) => {
  try {
    const expr = await compile(source);
    // Not enumerable: only a read by name finds it (expressions.ts).
    if (secrets) Object.defineProperty(context, "secrets", { value: secrets, enumerable: false });
    const value = toJson(await expr.evaluate(context));
    parentPort.postMessage({ id, ok: true, value });
  } catch (e) {
    const error = e && typeof e === "object"
      ? { message: String(e.message ?? e), code: typeof e.code === "string" ? e.code : undefined, position: typeof e.position === "number" ? e.position : undefined }
      : { message: String(e) };
    parentPort.postMessage({ id, ok: false, error });
  }
});
// Started: the expression's time limit counts from here, not from the thread's start-up.
parentPort.postMessage({ ready: true });
`;
