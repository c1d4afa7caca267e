/**
 * skein/client's subscribe against a real server: a run's stream read from its start, cut by
 * the server (its sockets destroyed, or the server closed and started again on the same port),
 * resumes by itself with Last-Event-ID: every stored event of the run arrives once, in order.
 */
import { describe, expect, it } from "vitest";
import type { StreamEvent, Subscription } from "../../src/client/index.js";
import { createServer } from "../../src/http/server.js";
import type { Engine } from "../../src/index.js";
import { TOKEN_LIST } from "../http/helpers.js";
import { listening, WORKFLOWS } from "./helpers.js";

/** A subscription's events as they arrive, and a promise per awaited event type. */
function collector() {
  const events: StreamEvent[] = [];
  const waiting: { type: string; resolve: () => void }[] = [];
  let opened = 0;
  const onEvent = (e: StreamEvent) => {
    events.push(e);
    for (const w of waiting.filter((w) => w.type === e.type)) w.resolve();
  };
  const seen = (type: string) =>
    events.some((e) => e.type === type)
      ? Promise.resolve()
      : new Promise<void>((resolve) => waiting.push({ type, resolve }));
  return {
    events,
    onEvent,
    seen,
    onConnection: (connected: boolean) => {
      if (connected) opened++;
    },
    opened: () => opened,
  };
}

/** The run's stored events: its whole history, in order. */
async function storedSeqs(engine: Engine, runId: string): Promise<number[]> {
  return (await engine.listEvents(runId, { limit: 1000 })).map((e) => e.seq);
}

function seqsOf(events: StreamEvent[]): number[] {
  return events.filter((e) => e.type !== "node.progress").map((e) => e.seq as number);
}

describe("subscribe", () => {
  it("resumes after the server destroys its connection: each stored event once, in order", async () => {
    const api = await listening();
    const admin = api.client();
    await admin.registerWorkflow({ id: "review", body: WORKFLOWS.review });
    const run = await admin.startRun({ body: { workflow_id: "review" } });
    const c = collector();
    let sub: Subscription | null = null;
    try {
      sub = admin.subscribe(run.run_id, c.onEvent, { fromStart: true, onConnection: c.onConnection });
      await c.seen("review.requested");
      expect(c.opened()).toBe(1);
      // Every socket of the server, the stream's among them, destroyed mid-run.
      api.app.server.closeAllConnections();
      await api.engine.review(run.run_id, "check", { decision: "approve", by: "alice" });
      await c.seen("run.succeeded");
      expect(c.opened()).toBeGreaterThanOrEqual(2);
    } finally {
      sub?.close();
    }
    const seqs = seqsOf(c.events);
    expect(seqs).toEqual(await storedSeqs(api.engine, run.run_id));
    expect(seqs.every((s, i) => i === 0 || s > (seqs[i - 1] as number))).toBe(true);
    expect(c.events[0]?.type).toBe("run.started");
    expect(sub?.cursor).toBe(String(seqs.at(-1)));
  });

  it("resumes after the server closes and starts again on the same port, with what happened meanwhile", async () => {
    const api = await listening();
    const admin = api.client();
    await admin.registerWorkflow({ id: "review", body: WORKFLOWS.review });
    const run = await admin.startRun({ body: { workflow_id: "review" } });
    const c = collector();
    const dropped = new Promise<void>((resolve) => {
      c.onConnection = (connected) => {
        if (!connected) resolve();
      };
    });
    const sub = admin.subscribe(run.run_id, c.onEvent, { fromStart: true, onConnection: (up) => c.onConnection(up) });
    const port = api.app.server.address();
    if (port === null || typeof port !== "object") throw new Error("not listening");
    let again: Awaited<ReturnType<typeof createServer>> | null = null;
    try {
      await c.seen("review.requested");
      await api.app.close();
      await dropped;
      // Decided while no server listens: the events wait in the database for the reconnection.
      await api.engine.review(run.run_id, "check", { decision: "approve", by: "alice" });
      await api.engine.waitForRun(run.run_id);
      again = await createServer({ engine: api.engine, tokens: TOKEN_LIST, ui: false });
      await again.listen({ host: "127.0.0.1", port: port.port });
      await c.seen("run.succeeded");
    } finally {
      sub.close();
      await again?.close();
    }
    const seqs = seqsOf(c.events);
    expect(seqs).toEqual(await storedSeqs(api.engine, run.run_id));
    expect(seqs.length).toBeGreaterThan(10);
  });

  it("starts after a cursor an earlier subscription reported, and ends for good on a refusal", async () => {
    const api = await listening();
    const admin = api.client();
    await admin.registerWorkflow({ id: "simple", body: WORKFLOWS.simple });
    const run = await admin.startRun({ body: { workflow_id: "simple" } });
    await api.engine.waitForRun(run.run_id);
    const stored = await storedSeqs(api.engine, run.run_id);
    const middle = stored[2];
    if (middle === undefined) throw new Error("too few events");

    const c = collector();
    const sub = admin.subscribe(run.run_id, c.onEvent, { cursor: String(middle) });
    try {
      await c.seen("run.succeeded");
    } finally {
      sub.close();
    }
    expect(seqsOf(c.events)).toEqual(stored.filter((s) => s > middle));

    const refused = await new Promise<{ error: Error; fatal: boolean }>((resolve) => {
      admin.subscribe("no-such-run", () => {}, {
        fromStart: true,
        onError: (error, fatal) => resolve({ error, fatal }),
      });
    });
    expect(refused.fatal).toBe(true);
    expect(refused.error).toMatchObject({ name: "SkeinApiError", status: 404, code: "not_found" });
  });

  it("waits out a refusal for too many streams (429, Retry-After) and then connects", async () => {
    const api = await listening({ server: { limits: { streamsPerToken: 1 } } });
    const admin = api.client();
    await admin.registerWorkflow({ id: "review", body: WORKFLOWS.review });
    const run = await admin.startRun({ body: { workflow_id: "review" } });
    const first = collector();
    const second = collector();
    const firstSub = admin.subscribe(run.run_id, first.onEvent, { fromStart: true });
    let secondSub: Subscription | null = null;
    try {
      await first.seen("run.started");
      const refused = await new Promise<Error>((resolve) => {
        secondSub = admin.subscribe(run.run_id, second.onEvent, {
          fromStart: true,
          onError: (error, fatal) => {
            if (!fatal) resolve(error);
          },
        });
      });
      expect(refused).toMatchObject({ status: 429, code: "too_many_requests", retryAfter: 5 });
      firstSub.close();
      await second.seen("run.started");
    } finally {
      firstSub.close();
      (secondSub as Subscription | null)?.close();
    }
    expect(seqsOf(second.events)).toEqual(seqsOf(first.events).slice(0, seqsOf(second.events).length));
  });
});
