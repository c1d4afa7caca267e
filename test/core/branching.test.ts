import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type BackoffSettings, retryDelayMs } from "../../src/core/backoff.js";
import { checkRoute, END } from "../../src/core/branching.js";
import { graphOf, nodeOf } from "./helpers.js";

describe("checkRoute", () => {
  // review -> pub_a, pub_b (forward) or fix (forward); fix -> review (loop-back), fix (self loop-back) or pub_a.
  const graph = graphOf([
    { node_id: "start" },
    {
      node_id: "review",
      depends_on: ["start"],
      next_on_success: [{ when: "output.ok = true", to: ["pub_a", "pub_b"] }, { to: "fix" }],
    },
    {
      node_id: "fix",
      next_on_success: [
        { when: "output.retry = true", to: "review" },
        { when: "output.again = true", to: "fix" },
        { to: "pub_a" },
      ],
    },
    { node_id: "pub_a" },
    { node_id: "pub_b", next_on_failure: "report" },
    { node_id: "report" },
  ]);
  const review = nodeOf(graph, "review");
  const fix = nodeOf(graph, "fix");
  const pubA = nodeOf(graph, "pub_a");
  const pubB = nodeOf(graph, "pub_b");

  it("accepts a subset of the declared success targets, across cases", () => {
    expect(checkRoute(graph, review, ["pub_b"])).toEqual({ kind: "targets", targets: ["pub_b"] });
    expect(checkRoute(graph, review, ["pub_a", "fix"])).toEqual({ kind: "targets", targets: ["pub_a", "fix"] });
    expect(checkRoute(graph, review, ["pub_b", "pub_a", "fix"])).toEqual({
      kind: "targets",
      targets: ["pub_b", "pub_a", "fix"],
    });
  });

  it("accepts the empty route (fires no edge)", () => {
    expect(checkRoute(graph, review, [])).toEqual({ kind: "targets", targets: [] });
  });

  it("accepts a single loop-back edge, including one to the node itself", () => {
    expect(checkRoute(graph, fix, ["review"])).toEqual({ kind: "targets", targets: ["review"] });
    expect(checkRoute(graph, fix, ["fix"])).toEqual({ kind: "targets", targets: ["fix"] });
  });

  it("rejects an unknown target with a message naming it", () => {
    const r = checkRoute(graph, review, ["pub_a", "nope"]);
    expect(r).toHaveProperty("invalid");
    const message = (r as { invalid: string }).invalid;
    expect(message).toContain('"nope"');
    expect(message).not.toContain('"pub_a"');
    expect(message).toContain("review");
  });

  it("rejects an existing node that is not a declared success target of this node", () => {
    // start is a node of the workflow, but review declares no edge to it.
    const r = checkRoute(graph, review, ["start"]);
    expect((r as { invalid: string }).invalid).toContain('"start"');
  });

  it("rejects a failure target used as a success route", () => {
    const r = checkRoute(graph, pubB, ["report"]);
    expect((r as { invalid: string }).invalid).toContain('"report"');
  });

  it("names every unknown target", () => {
    const r = checkRoute(graph, pubA, ["x1", "x2"]);
    const message = (r as { invalid: string }).invalid;
    expect(message).toContain('"x1"');
    expect(message).toContain('"x2"');
  });

  it("accepts $end alone, even on a node with no success targets", () => {
    expect(checkRoute(graph, review, [END])).toEqual({ kind: "end" });
    expect(checkRoute(graph, pubA, ["$end"])).toEqual({ kind: "end" });
  });

  it("rejects $end mixed with other targets", () => {
    for (const next of [
      ["$end", "pub_a"],
      ["pub_a", "$end"],
      ["$end", "nope"],
    ]) {
      const r = checkRoute(graph, review, next);
      expect(r, JSON.stringify(next)).toHaveProperty("invalid");
      expect((r as { invalid: string }).invalid).toContain("$end");
    }
  });

  it("rejects a loop-back mixed with a forward edge", () => {
    const r = checkRoute(graph, fix, ["review", "pub_a"]);
    expect(r).toHaveProperty("invalid");
    expect((r as { invalid: string }).invalid).toMatch(/loop-back/);
  });

  it("rejects two different loop-back edges in one decision", () => {
    expect(checkRoute(graph, fix, ["review", "fix"])).toHaveProperty("invalid");
  });

  it("deduplicates repeated forward targets", () => {
    expect(checkRoute(graph, review, ["pub_a", "pub_a", "pub_b", "pub_a"])).toEqual({
      kind: "targets",
      targets: ["pub_a", "pub_b"],
    });
  });

  it("deduplicates a repeated loop-back target: it is still one loop-back edge", () => {
    // A route is a set of targets: ["review", "review"] fires the one loop-back edge fix -> review.
    expect(checkRoute(graph, fix, ["review", "review"])).toEqual({ kind: "targets", targets: ["review"] });
  });

  it('deduplicates a repeated "$end": it is still $end alone', () => {
    expect(checkRoute(graph, review, ["$end", "$end"])).toEqual({ kind: "end" });
  });

  it("property: any list of review's forward targets is accepted, deduplicated", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom("pub_a", "pub_b", "fix"), { maxLength: 6 }), (next) => {
        expect(checkRoute(graph, review, next)).toEqual({ kind: "targets", targets: [...new Set(next)] });
      }),
    );
  });
});

describe("retryDelayMs", () => {
  const settings = (s: Partial<BackoffSettings>): BackoffSettings => ({
    retry_interval: 30,
    retry_backoff: "fixed",
    retry_max_interval: 3600,
    retry_jitter: "none",
    ...s,
  });
  const noRandom = () => {
    throw new Error("random must not be used without jitter");
  };

  it("fixed: the interval after every failure", () => {
    for (const n of [1, 2, 3, 10, 100]) expect(retryDelayMs(settings({}), n, noRandom)).toBe(30_000);
  });

  it("fixed: accepts fractions of a second and zero", () => {
    expect(retryDelayMs(settings({ retry_interval: 2.5 }), 1, noRandom)).toBe(2500);
    expect(retryDelayMs(settings({ retry_interval: 0.001 }), 1, noRandom)).toBe(1);
    expect(retryDelayMs(settings({ retry_interval: 0 }), 4, noRandom)).toBe(0);
  });

  it("exponential: interval x 2^(failures - 1)", () => {
    const s = settings({ retry_interval: 2, retry_backoff: "exponential" });
    expect([1, 2, 3, 4, 5].map((n) => retryDelayMs(s, n, noRandom))).toEqual([2000, 4000, 8000, 16_000, 32_000]);
  });

  it("exponential: with a fractional interval", () => {
    const s = settings({ retry_interval: 0.5, retry_backoff: "exponential" });
    expect([1, 2, 3].map((n) => retryDelayMs(s, n, noRandom))).toEqual([500, 1000, 2000]);
  });

  it("caps every delay at retry_max_interval", () => {
    const s = settings({ retry_interval: 10, retry_backoff: "exponential", retry_max_interval: 60 });
    expect([1, 2, 3, 4, 5, 100].map((n) => retryDelayMs(s, n, noRandom))).toEqual([
      10_000, 20_000, 40_000, 60_000, 60_000, 60_000,
    ]);
    expect(retryDelayMs(settings({ retry_interval: 100, retry_max_interval: 60 }), 1, noRandom)).toBe(60_000);
    expect(retryDelayMs(settings({ retry_interval: 5, retry_max_interval: 0 }), 1, noRandom)).toBe(0);
  });

  it("full jitter: a uniform random share of the capped delay, from the injected random", () => {
    const s = settings({
      retry_interval: 10,
      retry_backoff: "exponential",
      retry_max_interval: 60,
      retry_jitter: "full",
    });
    expect(retryDelayMs(s, 1, () => 0.5)).toBe(5000);
    expect(retryDelayMs(s, 3, () => 0.25)).toBe(10_000);
    expect(retryDelayMs(s, 1, () => 0)).toBe(0);
    // The cap applies before the jitter: 0.5 x min(10 x 2^9, 60) s.
    expect(retryDelayMs(s, 10, () => 0.5)).toBe(30_000);
    expect(retryDelayMs(settings({ retry_interval: 30, retry_jitter: "full" }), 1, () => 0.1)).toBe(3000);
  });

  it("full jitter: calls random once per delay", () => {
    let calls = 0;
    retryDelayMs(settings({ retry_jitter: "full" }), 2, () => {
      calls += 1;
      return 0.3;
    });
    expect(calls).toBe(1);
  });

  it("works on a compiled node's effective settings", () => {
    const graph = graphOf([
      { node_id: "a", retry_backoff: "exponential", retry_interval: 3, retry_max_interval: 20, retry_jitter: "none" },
    ]);
    const a = nodeOf(graph, "a");
    expect([1, 2, 3, 4].map((n) => retryDelayMs(a, n, noRandom))).toEqual([3000, 6000, 12_000, 20_000]);
  });

  it("property: the delay is a whole number of ms in [0, cap], non-decreasing in failures without jitter", () => {
    const arb = fc.record({
      retry_interval: fc.double({ min: 0, max: 7200, noNaN: true }),
      retry_backoff: fc.constantFrom<"fixed" | "exponential">("fixed", "exponential"),
      retry_max_interval: fc.double({ min: 0, max: 7200, noNaN: true }),
      retry_jitter: fc.constantFrom<"none" | "full">("none", "full"),
    });
    fc.assert(
      fc.property(
        arb,
        fc.integer({ min: 1, max: 101 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (s, n, r) => {
          const d = retryDelayMs(s, n, () => r);
          expect(Number.isInteger(d)).toBe(true);
          expect(d).toBeGreaterThanOrEqual(0);
          expect(d).toBeLessThanOrEqual(Math.round(s.retry_max_interval * 1000));
          if (s.retry_jitter === "none") {
            expect(retryDelayMs(s, n + 1, () => r)).toBeGreaterThanOrEqual(d);
            const full = retryDelayMs({ ...s, retry_jitter: "full" }, n, () => r);
            expect(full).toBeLessThanOrEqual(d);
          }
        },
      ),
    );
  });
});
