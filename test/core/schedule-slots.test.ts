/** Which slots a sweep fires (core/schedule-slots.ts): pure, no engine. */
import { describe, expect, it } from "vitest";
import { compileCron, dueSlots, ON_TIME_MS, parseCron, slotKey } from "../../src/core/schedule-slots.js";

const MINUTE = 60_000;
const T0 = Date.UTC(2026, 0, 1);

function cron(expr: string, zone = "UTC") {
  const c = parseCron(expr, zone);
  if ("path" in c) throw new Error(c.message);
  return c;
}

describe("dueSlots", () => {
  const every15 = cron("*/15 * * * *");
  const at = (m: number) => T0 + m * MINUTE;

  it("on time: only next_fire_at, and the next slot after it", () => {
    const s = { next_fire_at: at(15), catchup: "latest" as const, catchup_limit: 100 };
    expect(dueSlots(every15, s, at(15))).toEqual({ slots: [at(15)], next: at(30) });
    expect(dueSlots(every15, s, at(29))).toEqual({ slots: [at(15)], next: at(30) });
    expect(dueSlots(every15, s, at(14))).toEqual({ slots: [], next: at(15) });
  });

  it("after an outage: latest the most recent, all the most recent catchup_limit oldest first, none only if on time", () => {
    const base = { next_fire_at: at(15), catchup_limit: 100 };
    const now = at(100);
    expect(dueSlots(every15, { ...base, catchup: "latest" }, now)).toEqual({ slots: [at(90)], next: at(105) });
    expect(dueSlots(every15, { ...base, catchup: "all" }, now).slots).toEqual([15, 30, 45, 60, 75, 90].map(at));
    expect(dueSlots(every15, { ...base, catchup: "all", catchup_limit: 2 }, now).slots).toEqual([at(75), at(90)]);
    expect(dueSlots(every15, { ...base, catchup: "none" }, now).slots).toEqual([]);
    expect(dueSlots(every15, { ...base, catchup: "none" }, at(90) + ON_TIME_MS).slots).toEqual([at(90)]);
    expect(dueSlots(every15, { ...base, catchup: "none" }, at(90) + ON_TIME_MS + 1).slots).toEqual([]);
  });

  it("a paused schedule (no next_fire_at) has nothing due", () => {
    expect(dueSlots(every15, { next_fire_at: null, catchup: "all", catchup_limit: 5 }, at(100))).toEqual({
      slots: [],
      next: null,
    });
  });

  it("UTC by offset gives the same slots as a named zone without DST", () => {
    for (const zone of ["UTC", "Etc/UTC", "GMT"]) {
      expect(
        cron("0 9 * * 1", zone)
          .nextRuns(3, new Date(T0))
          .map((d) => d.toISOString()),
      ).toEqual(["2026-01-05T09:00:00.000Z", "2026-01-12T09:00:00.000Z", "2026-01-19T09:00:00.000Z"]);
    }
  });
});

describe("compileCron", () => {
  it("names the field and croner's reason", () => {
    expect(compileCron("* * * * * * *", "UTC", T0)).toMatchObject({ path: "cron", message: /5 or 6 parts/ });
    expect(compileCron("* * * * *", "Nowhere/Land", T0)).toMatchObject({ path: "timezone" });
    expect(compileCron("* * * * *", "", T0)).toMatchObject({ path: "timezone", message: /empty time zone/ });
    expect("path" in compileCron("0 3 * * *", "America/New_York", T0)).toBe(false);
  });

  it("keys a slot in ISO 8601 UTC", () => {
    expect(slotKey("nightly", Date.UTC(2026, 2, 29, 1))).toBe("skein:schedule:nightly:2026-03-29T01:00:00.000Z");
  });
});
