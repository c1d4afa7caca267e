import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { joinVerdict, readiness } from "../../src/core/readiness.js";
import type { VisitState } from "../../src/core/states.js";
import type { Visit } from "../../src/core/types.js";
import { graphOf, lookup, nodeOf, visit } from "./helpers.js";

type Join = "all" | "any" | "all_done";
/** The dependency states the brief names, with the handled flag a FAILED dependency carries. */
type Dep = "SUCCEEDED" | "FAILED_HANDLED" | "SKIPPED" | "CANCELLED" | "RUNNING" | "PENDING";

function depVisit(node_id: string, dep: Dep): Visit {
  if (dep === "FAILED_HANDLED")
    return visit(node_id, "FAILED", { handled: true, fired: ["x"], reason: "non_retryable" });
  if (dep === "SUCCEEDED") return visit(node_id, "SUCCEEDED", { fired: [] });
  return visit(node_id, dep);
}

/** a, b, c are free start nodes; m depends on `deps` of them with `join`. */
function joinGraph(join: Join, deps: string[]) {
  const graph = graphOf([
    { node_id: "a" },
    { node_id: "b" },
    { node_id: "c" },
    { node_id: "m", depends_on: deps, join },
  ]);
  return nodeOf(graph, "m");
}

function verdict(join: Join, deps: Dep[]) {
  const ids = ["a", "b", "c"].slice(0, deps.length);
  const m = joinGraph(join, ids);
  return joinVerdict(m, lookup(...ids.map((id, i) => depVisit(id, deps[i] as Dep))));
}

describe("joinVerdict, one dependency", () => {
  // DESIGN §2 join + §4: a handled FAILED dependency is done for any and all_done, unmet for all.
  const table: [Join, Dep, "met" | "wait" | "never"][] = [
    ["all", "SUCCEEDED", "met"],
    ["all", "FAILED_HANDLED", "never"],
    ["all", "SKIPPED", "never"],
    ["all", "CANCELLED", "never"],
    ["all", "RUNNING", "wait"],
    ["all", "PENDING", "wait"],
    ["any", "SUCCEEDED", "met"],
    ["any", "FAILED_HANDLED", "never"], // terminal, but no dependency SUCCEEDED
    ["any", "SKIPPED", "never"],
    ["any", "CANCELLED", "never"],
    ["any", "RUNNING", "wait"],
    ["any", "PENDING", "wait"],
    ["all_done", "SUCCEEDED", "met"],
    ["all_done", "FAILED_HANDLED", "met"],
    ["all_done", "SKIPPED", "met"],
    ["all_done", "CANCELLED", "met"],
    ["all_done", "RUNNING", "wait"],
    ["all_done", "PENDING", "wait"],
  ];
  it.each(table)("join %s with a %s dependency: %s", (join, dep, expected) => {
    expect(verdict(join, [dep])).toBe(expected);
  });

  it.each<VisitState>(["RETRYING", "IN_REVIEW"])("every join waits on a %s dependency", (state) => {
    for (const join of ["all", "any", "all_done"] as const) {
      expect(joinVerdict(joinGraph(join, ["a"]), lookup(visit("a", state))), join).toBe("wait");
    }
  });
});

describe("joinVerdict, several dependencies", () => {
  const table: [Join, Dep[], "met" | "wait" | "never"][] = [
    ["all", ["SUCCEEDED", "SUCCEEDED", "SUCCEEDED"], "met"],
    ["all", ["SUCCEEDED", "RUNNING"], "wait"],
    ["all", ["SUCCEEDED", "FAILED_HANDLED"], "never"],
    // Can no longer be met even while another dependency still runs.
    ["all", ["FAILED_HANDLED", "RUNNING"], "never"],
    ["all", ["PENDING", "SKIPPED"], "never"],
    ["all", ["CANCELLED", "SUCCEEDED", "PENDING"], "never"],
    ["any", ["SUCCEEDED", "FAILED_HANDLED"], "met"],
    ["any", ["SKIPPED", "SUCCEEDED", "CANCELLED"], "met"],
    ["any", ["FAILED_HANDLED", "SKIPPED"], "never"],
    ["any", ["SKIPPED", "CANCELLED"], "never"],
    // Every dependency must be terminal first, even after one succeeded.
    ["any", ["SUCCEEDED", "RUNNING"], "wait"],
    ["any", ["SUCCEEDED", "PENDING"], "wait"],
    ["any", ["FAILED_HANDLED", "PENDING"], "wait"],
    ["all_done", ["FAILED_HANDLED", "SKIPPED", "CANCELLED"], "met"],
    ["all_done", ["SUCCEEDED", "FAILED_HANDLED"], "met"],
    ["all_done", ["FAILED_HANDLED", "RUNNING"], "wait"],
    ["all_done", ["SUCCEEDED", "SUCCEEDED", "PENDING"], "wait"],
  ];
  it.each(table)("join %s with %j: %s", (join, deps, expected) => {
    expect(verdict(join, deps)).toBe(expected);
  });

  it.each<Join>(["all", "any", "all_done"])("join %s with no dependencies is met", (join) => {
    expect(joinVerdict(joinGraph(join, []), lookup())).toBe("met");
  });

  it("property: every join rule agrees with DESIGN §2 for random dependency states", () => {
    const deps: Dep[] = ["SUCCEEDED", "FAILED_HANDLED", "SKIPPED", "CANCELLED", "RUNNING", "PENDING"];
    const active = (d: Dep) => d === "RUNNING" || d === "PENDING";
    fc.assert(
      fc.property(
        fc.constantFrom<Join>("all", "any", "all_done"),
        fc.array(fc.constantFrom(...deps), { minLength: 1, maxLength: 3 }),
        (join, states) => {
          const allDone = states.every((d) => !active(d));
          let expected: "met" | "wait" | "never";
          if (join === "all") {
            if (states.some((d) => !active(d) && d !== "SUCCEEDED")) expected = "never";
            else expected = allDone ? "met" : "wait";
          } else if (join === "any") {
            if (!allDone) expected = "wait";
            else expected = states.includes("SUCCEEDED") ? "met" : "never";
          } else {
            expected = allDone ? "met" : "wait";
          }
          expect(verdict(join, states)).toBe(expected);
        },
      ),
    );
  });
});

describe("readiness: activation of gated nodes", () => {
  // g is gated by s1 (success case) and s2 (failure edge); h only by s1; f is free.
  const graph = graphOf([
    { node_id: "s1", next_on_success: [{ when: "output.go = true", to: ["g"] }, { to: ["h"] }] },
    { node_id: "s2", next_on_failure: "g" },
    { node_id: "g" },
    { node_id: "h" },
    { node_id: "f" },
  ]);
  const g = nodeOf(graph, "g");
  const h = nodeOf(graph, "h");

  it("compiles g as gated by s1 and s2, f as free", () => {
    expect(g.gated).toBe(true);
    expect(g.incomingForward).toEqual(["s1", "s2"]);
    expect(h.incomingForward).toEqual(["s1"]);
    expect(nodeOf(graph, "f").gated).toBe(false);
  });

  it("waits while every incoming source is undecided", () => {
    const r = readiness(g, visit("g"), lookup(visit("s1", "RUNNING"), visit("s2", "PENDING")));
    expect(r).toEqual({ kind: "wait", trigger: null });
  });

  it.each<VisitState>(["PENDING", "RUNNING", "RETRYING", "IN_REVIEW"])(
    "waits while one source is still %s and the other decided without firing",
    (state) => {
      const s1 = visit("s1", "SUCCEEDED", { fired: ["h"] });
      expect(readiness(g, visit("g"), lookup(s1, visit("s2", state)))).toEqual({ kind: "wait", trigger: null });
    },
  );

  it("is SKIPPED (branch_not_taken) when every source decided without firing into it", () => {
    const s1 = visit("s1", "SUCCEEDED", { fired: ["h"] });
    const s2 = visit("s2", "SUCCEEDED", { fired: [] });
    expect(readiness(g, visit("g"), lookup(s1, s2))).toEqual({ kind: "skip", reason: "branch_not_taken" });
  });

  it("treats SKIPPED and CANCELLED sources as decided without firing", () => {
    const r = readiness(g, visit("g"), lookup(visit("s1", "SKIPPED"), visit("s2", "CANCELLED")));
    expect(r).toEqual({ kind: "skip", reason: "branch_not_taken" });
  });

  it("treats a source that succeeded with no case holding (fired []) as decided", () => {
    const r = readiness(h, visit("h"), lookup(visit("s1", "SUCCEEDED", { fired: [] })));
    expect(r).toEqual({ kind: "skip", reason: "branch_not_taken" });
  });

  it("is ready when one source fired, with that source's visit as trigger", () => {
    const s1 = visit("s1", "SUCCEEDED", { fired: ["h"] });
    const s2 = visit("s2", "FAILED", { visit: 3, handled: true, fired: ["g"] });
    const r = readiness(g, visit("g"), lookup(s1, s2));
    expect(r.kind).toBe("ready");
    expect(r.kind !== "skip" && r.trigger).toBe(s2);
  });

  it("is ready on the first firing even while another source is undecided", () => {
    const s1 = visit("s1", "SUCCEEDED", { fired: ["g"] });
    const r = readiness(g, visit("g"), lookup(s1, visit("s2", "RUNNING")));
    expect(r).toEqual({ kind: "ready", trigger: s1 });
  });

  it("is ready with either firing source as trigger when both fired", () => {
    const s1 = visit("s1", "SUCCEEDED", { fired: ["g"] });
    const s2 = visit("s2", "FAILED", { handled: true, fired: ["g"] });
    const r = readiness(g, visit("g"), lookup(s1, s2));
    expect(r.kind).toBe("ready");
    expect([s1, s2]).toContain(r.kind !== "skip" ? r.trigger : undefined);
  });

  it("is ready when made by a loop-back (loop_activated), whatever its forward sources say", () => {
    const sources = [
      lookup(visit("s1", "PENDING"), visit("s2", "PENDING")),
      lookup(visit("s1", "SUCCEEDED", { fired: ["h"] }), visit("s2", "SKIPPED")),
    ];
    for (const current of sources) {
      const r = readiness(g, visit("g", "PENDING", { visit: 2, loop_activated: true }), current);
      expect(r).toEqual({ kind: "ready", trigger: null });
    }
  });

  it("never gates a free node", () => {
    expect(readiness(nodeOf(graph, "f"), visit("f"), lookup())).toEqual({ kind: "ready", trigger: null });
  });

  it("property: a gated node is ready iff a source fired or a loop made it, else waits iff a source is undecided", () => {
    const sourceArb = fc.oneof(
      fc.constantFrom<VisitState>("PENDING", "RUNNING", "RETRYING", "IN_REVIEW", "SKIPPED", "CANCELLED").map((s) => ({
        state: s,
        fired: null as string[] | null,
      })),
      fc.record({
        state: fc.constantFrom<VisitState>("SUCCEEDED", "FAILED"),
        fired: fc.subarray(["g", "h"]),
      }),
    );
    fc.assert(
      fc.property(sourceArb, sourceArb, fc.boolean(), (a, b, looped) => {
        const s1 = visit("s1", a.state, { fired: a.fired, handled: a.state === "FAILED" });
        const s2 = visit("s2", b.state, { fired: b.fired, handled: b.state === "FAILED" });
        const r = readiness(g, visit("g", "PENDING", { loop_activated: looped }), lookup(s1, s2));
        const firing = [s1, s2].filter((s) => s.fired?.includes("g"));
        const undecided = [a, b].some((s) => !["SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED"].includes(s.state));
        if (firing.length > 0 || looped) {
          expect(r.kind).toBe("ready");
          if (firing.length > 0 && r.kind === "ready") expect(firing).toContain(r.trigger);
        } else if (undecided) {
          expect(r).toEqual({ kind: "wait", trigger: null });
        } else {
          expect(r).toEqual({ kind: "skip", reason: "branch_not_taken" });
        }
      }),
    );
  });
});

describe("readiness: activation and join together", () => {
  // t is gated by s and depends on a.
  const graph = graphOf([
    { node_id: "a" },
    { node_id: "s", next_on_success: [{ when: "output.go = true", to: ["t"] }] },
    { node_id: "t", depends_on: ["a"] },
  ]);
  const t = nodeOf(graph, "t");
  const fired = visit("s", "SUCCEEDED", { fired: ["t"] });

  it("waits for its dependencies once activated, keeping the trigger", () => {
    expect(readiness(t, visit("t"), lookup(visit("a", "RUNNING"), fired))).toEqual({ kind: "wait", trigger: fired });
  });

  it("is ready once activated and its join is met", () => {
    expect(readiness(t, visit("t"), lookup(visit("a", "SUCCEEDED"), fired))).toEqual({ kind: "ready", trigger: fired });
  });

  it("is SKIPPED (dependency_unmet) when its join can no longer be met, even if activated", () => {
    const a = visit("a", "FAILED", { handled: true, fired: [] });
    expect(readiness(t, visit("t"), lookup(a, fired))).toEqual({ kind: "skip", reason: "dependency_unmet" });
  });

  it("is SKIPPED (dependency_unmet) when its join can no longer be met while its source is undecided", () => {
    expect(readiness(t, visit("t"), lookup(visit("a", "SKIPPED"), visit("s", "RUNNING")))).toEqual({
      kind: "skip",
      reason: "dependency_unmet",
    });
  });

  it("is SKIPPED (branch_not_taken) when not activated, even while its dependencies still run", () => {
    const s = visit("s", "SUCCEEDED", { fired: [] });
    expect(readiness(t, visit("t"), lookup(visit("a", "RUNNING"), s))).toEqual({
      kind: "skip",
      reason: "branch_not_taken",
    });
  });

  it("waits when neither activated nor its dependencies done", () => {
    expect(readiness(t, visit("t"), lookup(visit("a", "RUNNING"), visit("s", "RUNNING")))).toEqual({
      kind: "wait",
      trigger: null,
    });
  });
});

describe("readiness of free nodes by join rule", () => {
  function free(join: Join) {
    return nodeOf(
      graphOf([
        { node_id: "x", next_on_failure: "y" },
        { node_id: "y" },
        { node_id: "z" },
        { node_id: "m", depends_on: ["x", "z"], join },
      ]),
      "m",
    );
  }
  const handledX = visit("x", "FAILED", { handled: true, fired: ["y"] });

  it("join all: a handled FAILED dependency makes it SKIPPED (dependency_unmet)", () => {
    expect(readiness(free("all"), visit("m"), lookup(handledX, visit("z", "SUCCEEDED")))).toEqual({
      kind: "skip",
      reason: "dependency_unmet",
    });
  });

  it("join any: a handled FAILED dependency counts as done; one success makes it ready", () => {
    expect(readiness(free("any"), visit("m"), lookup(handledX, visit("z", "SUCCEEDED")))).toEqual({
      kind: "ready",
      trigger: null,
    });
    expect(readiness(free("any"), visit("m"), lookup(handledX, visit("z", "RUNNING")))).toEqual({
      kind: "wait",
      trigger: null,
    });
    expect(readiness(free("any"), visit("m"), lookup(handledX, visit("z", "SKIPPED")))).toEqual({
      kind: "skip",
      reason: "dependency_unmet",
    });
  });

  it("join all_done: a handled FAILED dependency counts as done", () => {
    expect(readiness(free("all_done"), visit("m"), lookup(handledX, visit("z", "CANCELLED")))).toEqual({
      kind: "ready",
      trigger: null,
    });
    expect(readiness(free("all_done"), visit("m"), lookup(handledX, visit("z", "PENDING")))).toEqual({
      kind: "wait",
      trigger: null,
    });
  });
});
