import { describe, expect, it } from "vitest";
import { withIsoTimes } from "../../src/cli/json-times.js";

describe("withIsoTimes", () => {
  it("adds x_at_iso after each x_at (and at_iso after at), nested, null for null, and leaves user data alone", () => {
    const t = Date.UTC(2026, 0, 2, 3, 4, 5, 6);
    const value = {
      run_id: "r",
      created_at: t,
      ended_at: null,
      input: { due_at: 5 },
      nodes: [{ started_at: t, output: { sent_at: 1 }, payload: { at: 2 } }],
      events: [{ at: t, data: { retry_at: t } }],
      label_at: "not a time",
    };
    const iso = "2026-01-02T03:04:05.006Z";
    expect(withIsoTimes(value)).toEqual({
      run_id: "r",
      created_at: t,
      created_at_iso: iso,
      ended_at: null,
      ended_at_iso: null,
      input: { due_at: 5 },
      nodes: [{ started_at: t, started_at_iso: iso, output: { sent_at: 1 }, payload: { at: 2 } }],
      events: [{ at: t, at_iso: iso, data: { retry_at: t, retry_at_iso: iso } }],
      label_at: "not a time",
    });
    expect(Object.keys(withIsoTimes({ created_at: t, x: 1 }) as object)).toEqual(["created_at", "created_at_iso", "x"]);
  });
});
