/**
 * The replay's hand-over from history to live events, with commits landing at chosen moments:
 * a reader that publishes events while it reads a page (as another transaction would commit
 * during a PostgreSQL read), some of which the page or a later one also returns.
 */
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { RunEvent } from "../../src/core/types.js";
import { Subscribers } from "../../src/engine/subscribers.js";

const event = (seq: number, run_id = "r1"): RunEvent =>
  ({ seq, run_id, type: "node.ready", node_id: "n", visit: 1, at: seq, data: {} }) as unknown as RunEvent;

describe("Subscribers.replay", () => {
  it("delivers each seq once and in order when commits land during the replay's reads", async () => {
    const subscribers = new Subscribers(pino({ level: "silent" }));
    // The database: seqs 1..1200, of which 1..700 are committed before the replay starts.
    let committed = 700;
    const reads: number[] = [];
    const got: number[] = [];
    await new Promise<void>((resolve) => {
      subscribers.replay(
        (e) => {
          if (e.type === "node.progress") return;
          got.push(e.seq);
          if (e.seq === 1200) resolve();
        },
        "r1",
        {
          from: 0,
          readEvents: async (_runId, { afterSeq, limit }) => {
            reads.push(afterSeq);
            // 300 more commit (and are published) while this page is read; the page sees them.
            const before = committed;
            committed = Math.min(1200, committed + 300);
            subscribers.publish(Array.from({ length: committed - before }, (_, i) => event(before + i + 1)));
            subscribers.publish([event(5, "other-run")]);
            const page: RunEvent[] = [];
            for (let s = Math.max(afterSeq + 1, 1); s <= committed && page.length < limit; s++) page.push(event(s));
            return page;
          },
        },
      );
    });
    expect(got).toEqual(Array.from({ length: 1200 }, (_, i) => i + 1));
    expect(reads.length).toBeGreaterThan(1); // paged, not one read
  });

  it("from skips the earlier seqs, live ones included", async () => {
    const subscribers = new Subscribers(pino({ level: "silent" }));
    const got: number[] = [];
    await new Promise<void>((resolve) => {
      subscribers.replay(
        (e) => {
          if (e.type === "node.progress") return;
          got.push(e.seq);
          if (e.seq === 12) resolve();
        },
        "r1",
        {
          from: 10,
          readEvents: async (_runId, { afterSeq }) => {
            subscribers.publish([event(9), event(11)]);
            return [event(10), event(11)].filter((e) => e.seq > afterSeq);
          },
        },
      );
      // After the replay: live.
      setImmediate(() => subscribers.publish([event(11), event(12)]));
    });
    expect(got).toEqual([10, 11, 12]);
  });

  it("a failed read ends the subscription and says so", async () => {
    const subscribers = new Subscribers(pino({ level: "silent" }));
    const got: number[] = [];
    const failure = await new Promise<unknown>((resolve) => {
      subscribers.replay((e) => got.push(e.type === "node.progress" ? -1 : e.seq), "r1", {
        from: 0,
        readEvents: async () => {
          throw new Error("database gone");
        },
        onError: resolve,
      });
    });
    subscribers.publish([event(1)]);
    expect(String(failure)).toMatch(/database gone/);
    expect(got).toEqual([]);
  });
});
