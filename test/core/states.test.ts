import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  assertTransition,
  canTransition,
  deriveRunStatus,
  type EndCause,
  isTerminal,
  VISIT_STATES,
  type VisitState,
} from "../../src/core/states.js";

// DESIGN §3, written out independently of src/core/states.ts.
const STATES: VisitState[] = [
  "PENDING",
  "RUNNING",
  "SUCCEEDED",
  "FAILED",
  "RETRYING",
  "IN_REVIEW",
  "WAITING",
  "SKIPPED",
  "CANCELLED",
];
const LEGAL: Record<VisitState, VisitState[]> = {
  PENDING: ["RUNNING", "IN_REVIEW", "WAITING", "SKIPPED", "CANCELLED", "FAILED"],
  // IN_REVIEW: an agent's tool call waits for approval; RETRYING from it once decided.
  RUNNING: ["SUCCEEDED", "FAILED", "RETRYING", "CANCELLED", "IN_REVIEW"],
  RETRYING: ["RUNNING", "CANCELLED", "FAILED"],
  IN_REVIEW: ["SUCCEEDED", "FAILED", "CANCELLED", "RETRYING"],
  WAITING: ["SUCCEEDED", "FAILED", "CANCELLED"],
  SUCCEEDED: [],
  FAILED: [],
  SKIPPED: [],
  CANCELLED: [],
};
const TERMINAL: VisitState[] = ["SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED"];
const NON_TERMINAL: VisitState[] = ["PENDING", "RUNNING", "RETRYING", "IN_REVIEW", "WAITING"];

const PAIRS = STATES.flatMap((from) => STATES.map((to) => ({ from, to, legal: LEGAL[from].includes(to) })));

describe("visit states", () => {
  it("has exactly the nine states of DESIGN §3", () => {
    expect([...VISIT_STATES].sort()).toEqual([...STATES].sort());
  });

  it("calls exactly SUCCEEDED, FAILED, SKIPPED and CANCELLED terminal", () => {
    for (const s of STATES) expect(isTerminal(s), s).toBe(TERMINAL.includes(s));
  });

  it("covers all 81 pairs, 21 of them legal", () => {
    expect(PAIRS).toHaveLength(81);
    expect(PAIRS.filter((p) => p.legal)).toHaveLength(21);
  });

  it.each(PAIRS)("$from -> $to (legal: $legal)", ({ from, to, legal }) => {
    expect(canTransition(from, to)).toBe(legal);
    if (legal) {
      expect(() => assertTransition(from, to, "test")).not.toThrow();
    } else {
      expect(() => assertTransition(from, to, "where-it-happened")).toThrow(
        new RegExp(`illegal visit transition ${from} -> ${to} \\(where-it-happened\\)`),
      );
    }
  });

  it.each(TERMINAL)("terminal state %s never changes", (from) => {
    for (const to of STATES) expect(canTransition(from, to), `${from} -> ${to}`).toBe(false);
  });
});

const v = (state: VisitState, handled = false) => ({ state, handled });

describe("deriveRunStatus", () => {
  it.each(NON_TERMINAL)("is RUNNING while a visit is %s", (state) => {
    expect(deriveRunStatus({ visits: [v("SUCCEEDED"), v(state), v("SKIPPED")], endCause: null })).toBe("RUNNING");
  });

  it("is RUNNING while a visit is non-terminal even after an unhandled failure", () => {
    // The scheduler ends the run on an unhandled failure; until then the visits decide.
    expect(deriveRunStatus({ visits: [v("FAILED"), v("RUNNING")], endCause: null })).toBe("RUNNING");
  });

  it("is SUCCEEDED when every visit is terminal and none failed unhandled", () => {
    const visits = [v("SUCCEEDED"), v("SKIPPED"), v("CANCELLED"), v("SUCCEEDED")];
    expect(deriveRunStatus({ visits, endCause: null })).toBe("SUCCEEDED");
  });

  it("is SUCCEEDED for a run without visits", () => {
    expect(deriveRunStatus({ visits: [], endCause: null })).toBe("SUCCEEDED");
  });

  it("is FAILED with an unhandled failure", () => {
    expect(deriveRunStatus({ visits: [v("SUCCEEDED"), v("FAILED", false)], endCause: null })).toBe("FAILED");
  });

  it("is SUCCEEDED when the only failure was handled", () => {
    expect(deriveRunStatus({ visits: [v("FAILED", true), v("SUCCEEDED")], endCause: null })).toBe("SUCCEEDED");
  });

  it("is FAILED when one failure is handled and another is not", () => {
    expect(deriveRunStatus({ visits: [v("FAILED", true), v("FAILED", false)], endCause: null })).toBe("FAILED");
  });

  it.each<[EndCause, string]>([
    ["failed", "FAILED"],
    ["ttl", "FAILED"],
    ["cancelled", "CANCELLED"],
    ["end", "SUCCEEDED"],
  ])("end cause %s gives %s whatever the visits", (endCause, expected) => {
    for (const visits of [[v("SUCCEEDED")], [v("FAILED")], [v("FAILED", true), v("SKIPPED")], []]) {
      expect(deriveRunStatus({ visits, endCause })).toBe(expected);
    }
  });

  it("is SUCCEEDED after $end even though a failure is recorded", () => {
    expect(deriveRunStatus({ visits: [v("FAILED"), v("CANCELLED")], endCause: "end" })).toBe("SUCCEEDED");
  });

  it.each(NON_TERMINAL)("is COMPENSATING while a compensation row is %s", (state) => {
    for (const endCause of [null, "failed", "ttl", "cancelled"] as const) {
      expect(deriveRunStatus({ visits: [v("FAILED")], compensations: [{ state }], endCause })).toBe("COMPENSATING");
    }
  });

  it("is COMPENSATING while compensation is planned but its rows are not made yet", () => {
    for (const endCause of ["failed", "ttl", "cancelled"] as const) {
      for (const visits of [[v("FAILED")], [v("CANCELLED"), v("SUCCEEDED")]]) {
        expect(deriveRunStatus({ visits, compensationPlanned: true, endCause })).toBe("COMPENSATING");
        const compensations = [{ state: "SUCCEEDED" as const }];
        expect(deriveRunStatus({ visits, compensations, compensationPlanned: true, endCause })).toBe("COMPENSATING");
      }
    }
  });

  it("is no longer COMPENSATING once every compensation row is terminal", () => {
    const compensations = [{ state: "SUCCEEDED" as const }, { state: "FAILED" as const }];
    expect(deriveRunStatus({ visits: [v("FAILED")], compensations, endCause: "failed" })).toBe("FAILED");
    expect(deriveRunStatus({ visits: [v("CANCELLED")], compensations, endCause: "cancelled" })).toBe("CANCELLED");
  });

  it("property: with no end cause and no compensations, RUNNING iff some visit is non-terminal", () => {
    const visitArb = fc.record({ state: fc.constantFrom(...STATES), handled: fc.boolean() });
    fc.assert(
      fc.property(fc.array(visitArb, { maxLength: 20 }), (visits) => {
        const status = deriveRunStatus({ visits, endCause: null });
        const someActive = visits.some((x) => NON_TERMINAL.includes(x.state));
        expect(status === "RUNNING").toBe(someActive);
        if (!someActive) {
          const unhandled = visits.some((x) => x.state === "FAILED" && !x.handled);
          expect(status).toBe(unhandled ? "FAILED" : "SUCCEEDED");
        }
      }),
      { numRuns: 500 },
    );
  });

  it("property: the result does not depend on the order of the visits", () => {
    const visitArb = fc.record({ state: fc.constantFrom(...STATES), handled: fc.boolean() });
    fc.assert(
      fc.property(fc.array(visitArb, { maxLength: 12 }), (visits) => {
        const reversed = [...visits].reverse();
        expect(deriveRunStatus({ visits: reversed, endCause: null })).toBe(deriveRunStatus({ visits, endCause: null }));
      }),
    );
  });
});
