/**
 * The estimate of the database's clock a trusting PostgreSQL transaction judges due times by
 * (store/postgres/db-time.ts): the last reading carried forward by a monotonic clock, for at
 * most a second, never going back. The monotonic clock is the test's.
 */
import { describe, expect, it } from "vitest";
import { DatabaseTime } from "../../src/store/postgres/db-time.js";

describe("the database's time between readings", () => {
  it("has no estimate before a reading, and none once the reading is a second old", () => {
    let t = 50;
    const time = new DatabaseTime(() => t);
    expect(time.estimate()).toBeNull();
    time.saw(1_000_000);
    t += 400;
    expect(time.estimate()).toBe(1_000_400);
    t += 600;
    expect(time.estimate()).toBe(1_001_000);
    t += 1;
    expect(time.estimate()).toBeNull();
    time.saw(2_000_000);
    expect(time.estimate()).toBe(2_000_000);
    time.forget();
    expect(time.estimate()).toBeNull();
  });

  it("never goes back when a new reading is behind the last estimate", () => {
    let t = 0;
    const time = new DatabaseTime(() => t);
    time.saw(1_000_000);
    t = 300;
    expect(time.estimate()).toBe(1_000_300);
    time.saw(1_000_100); // the database's answer took its time to arrive
    expect(time.estimate()).toBe(1_000_300);
    t = 500;
    expect(time.estimate()).toBe(1_000_300);
    t = 700;
    expect(time.estimate()).toBe(1_000_500);
  });
});
