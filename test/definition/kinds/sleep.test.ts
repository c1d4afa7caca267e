/** `sleep`'s rules (DESIGN §11.4): `{ seconds }` or `{ until }`, plain edges, no decide hook. */
import { describe, expect, it } from "vitest";
import { validateWorkflow } from "../../../src/definition/index.js";
import { errorsOf, expectOneError, expectValid, withNode } from "./helpers.js";

const sleeping = (payload: unknown, extra: Record<string, unknown> = {}) =>
  withNode("sleep", { payload, ...extra }, [], [{ node_id: "after" }]);

describe("sleep: payload", () => {
  it("accepts seconds, an ISO 8601 until with a time zone, epoch ms, a date, or templates", () => {
    for (const payload of [
      { seconds: 0 },
      { seconds: 1.5 },
      { until: "2030-01-31T09:00:00Z" },
      { until: "2030-01-31T09:00:00.123+02:00" },
      { until: "2030-01-31" },
      { until: 1_900_000_000_000 },
      { seconds: "{{ input.wait }}" },
      { until: "{{ input.at }}" },
    ]) {
      expectValid(sleeping(payload, { next_on_success: "after" }));
    }
  });

  it("refuses a payload with neither seconds nor until, giving an example", () => {
    expectOneError(sleeping({}), "nodes[0].payload", "needs seconds (how long to wait) or until");
    expectOneError(sleeping({ wait: 5 }), "nodes[0].payload", 'e.g. { "seconds": 3600 }');
  });

  it("refuses both seconds and until", () => {
    expectOneError(
      sleeping({ seconds: 5, until: 1 }),
      "nodes[0].payload",
      "has both seconds and until: give one of them",
    );
  });

  it("refuses seconds that are not a number of seconds, 0 or more", () => {
    for (const seconds of [-1, "5", null, 1e20]) {
      expectOneError(
        sleeping({ seconds }),
        "nodes[0].payload",
        `seconds must be a number of seconds, 0 or more, got ${JSON.stringify(seconds)}`,
      );
    }
  });

  it("refuses an until that is neither epoch ms nor ISO 8601 with a time zone", () => {
    expectOneError(
      sleeping({ until: -5 }),
      "nodes[0].payload",
      "until must be epoch milliseconds (an integer, 0 or more), got -5",
    );
    expectOneError(sleeping({ until: 1.5 }), "nodes[0].payload", "until must be epoch milliseconds");
    for (const until of ["2030-01-31T09:00:00", "tomorrow", "2030-01-31 09:00Z"]) {
      const [error] = errorsOf(sleeping({ until }));
      expect(error?.path).toBe("nodes[0].payload");
      expect(error?.message).toContain(
        `ISO 8601 time with a time zone (e.g. "2030-01-31T09:00:00Z") or epoch milliseconds, got ${JSON.stringify(until)}`,
      );
    }
  });

  it("refuses a day that does not exist, which Date.parse would roll over into the next month", () => {
    for (const until of ["2030-02-31T09:00:00Z", "2030-04-31", "2029-02-29T00:00:00+02:00"]) {
      expectOneError(
        sleeping({ until }),
        "nodes[0].payload",
        `until names a day that does not exist: ${JSON.stringify(until)}`,
      );
    }
    // A leap day, and a year before 100 (in the past: the sleep ends at once).
    for (const until of ["2028-02-29T00:00:00Z", "0050-06-30T00:00:00Z"]) {
      expectValid(sleeping({ until }, { next_on_success: "after" }));
    }
  });
});

describe("sleep: edges and hooks", () => {
  it("refuses a decide hook: its output is always { slept_until }", () => {
    expectOneError(sleeping({ seconds: 1 }, { decide: "pick" }), "nodes[0].decide", "a sleep node has no decide hook");
  });

  it('refuses "when" on its edges, and accepts plain targets', () => {
    const branching = sleeping({ seconds: 1 }, { next_on_success: [{ when: "output.x", to: "after" }] });
    expectOneError(branching, "nodes[0].next_on_success", 'a sleep node cannot branch with "when"');
    expectValid(sleeping({ seconds: 1 }, { next_on_success: [{ to: "after" }] }));
  });

  it("reports every problem of one node, not the first only", () => {
    const errors = errorsOf(sleeping({}, { decide: "pick", next_on_success: [{ when: "output.x", to: "after" }] }));
    expect(errors.map((e) => e.path)).toEqual(["nodes[0].payload", "nodes[0].decide", "nodes[0].next_on_success"]);
  });

  it("refuses a secret in its payload: secrets go only to agents", () => {
    const result = validateWorkflow(sleeping({ seconds: "{{ secrets.WAIT }}" }));
    expect(result.ok).toBe(false);
    expect(result.errors.map((e) => e.message).join("\n")).toContain("a sleep node's payload cannot hold secrets");
  });
});
