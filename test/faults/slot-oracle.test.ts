/**
 * The slot oracle can fail: each figure counts the defect it is for, on made-up runs (case k's
 * zeros mean something only if a lost, doubled or early slot would show).
 */
import { describe, expect, it } from "vitest";
import { type ScheduledRunRow, slotFigures } from "./slot-oracle.js";

const ID = "s";
const T0 = Date.UTC(2026, 11, 1, 20, 0, 0);
const WINDOW = [T0, T0 + 1000, T0 + 2000];
let n = 0;
const run = (slot: number, extra: Partial<ScheduledRunRow> = {}): ScheduledRunRow => ({
  run_id: `r${++n}`,
  status: "SUCCEEDED",
  idempotency_key: `skein:schedule:${ID}:${new Date(slot).toISOString()}`,
  schedule_id: ID,
  created_at: slot + 5,
  ...extra,
});

describe("slotFigures", () => {
  it("counts nothing when each slot started one run on time", () => {
    const f = slotFigures([run(T0), run(T0 + 1000), run(T0 + 2000), run(T0 + 3000)], ID, WINDOW, 2000);
    expect(f).toMatchObject({ slots: 3, lost: 0, doubled: 0, early: 0, late: 0, problems: [] });
    expect(f.windowRuns).toHaveLength(3);
  });

  it("counts a slot without a run as lost", () => {
    const f = slotFigures([run(T0), run(T0 + 2000)], ID, WINDOW, 2000);
    expect(f.lost).toBe(1);
    expect(f.problems).toEqual([`lost: slot ${new Date(T0 + 1000).toISOString()} started no run`]);
  });

  it("counts a second run of a slot as doubled, whatever spelling of the slot its key has", () => {
    const other = run(T0, {
      idempotency_key: `skein:schedule:${ID}:${new Date(T0).toISOString().replace(".000Z", "Z")}`,
    });
    const f = slotFigures([run(T0), run(T0), run(T0 + 1000), run(T0 + 2000), other], ID, WINDOW, 2000);
    expect(f.doubled).toBe(1);
    expect(f.problems.some((p) => p.includes("names no slot"))).toBe(true);
  });

  it("counts a run created before its slot as early and one long after as late", () => {
    const f = slotFigures(
      [run(T0, { created_at: T0 - 1 }), run(T0 + 1000, { created_at: T0 + 9000 }), run(T0 + 2000)],
      ID,
      WINDOW,
      2000,
    );
    expect({ early: f.early, late: f.late, latestMs: f.latestMs }).toEqual({ early: 1, late: 1, latestMs: 8000 });
  });

  it("reports a run without its schedule_id and a key between the cron's slots", () => {
    const f = slotFigures(
      [run(T0, { schedule_id: null }), run(T0 + 500), run(T0 + 1000), run(T0 + 2000)],
      ID,
      WINDOW,
      2000,
    );
    expect(f.problems).toHaveLength(2);
  });
});
