/**
 * A run's stream survives (DESIGN §15): a subscriber of `GET /v1/stream` that disconnects mid-
 * stream, and one whose `skein serve` is killed with SIGKILL and started again, resumes with
 * Last-Event-ID and receives every event and progress chunk exactly once, in order: what it
 * receives is the run's stored history, seq for seq. The killed attempt's stream is superseded;
 * the attempt run again streams its text whole. Synchronised on what the stream delivers.
 *
 * SQLite only (the postgres project leaves it out): a restarted engine knows at once that the
 * dead one's process is gone; on PostgreSQL it would wait for the dead engine's heartbeat to
 * expire, and the stream's storage is the event log both stores share.
 */
import { createServer } from "node:net";
import { join } from "node:path";
import { createParser } from "eventsource-parser";
import { describe, expect, it } from "vitest";
import { ROOT, requireBuiltCli, Skein, workspace } from "./helpers.js";

requireBuiltCli();

const STREAM_AGENTS = join(ROOT, "test", "fixtures", "stream-agents.ts");
const WORKFLOW = { id: "stream", nodes: [{ node_id: "s", agent_type: "streamer" }] };

interface Sent {
  id: string;
  event: string | undefined;
  data: { seq: number; type: string; data: Record<string, unknown> };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function serve(dir: string, db: string, port: number): Promise<Skein> {
  const server = new Skein(["serve", "--port", String(port), "--agents", STREAM_AGENTS, "--db", db], dir);
  await server.waitFor(/serving the HTTP API on http:\/\/\S+\/v1/, undefined, "stderr");
  return server;
}

/**
 * Reads the run's stream from after `lastId` (from the start without one) into `got` until
 * `enough(got)` holds (then it disconnects) or the connection ends; resolves either way. `tap`
 * sees each event as it arrives.
 */
async function readStream(
  base: string,
  runId: string,
  got: Sent[],
  enough: (got: Sent[]) => boolean,
  tap: (got: Sent[]) => void = () => {},
): Promise<void> {
  const controller = new AbortController();
  const last = got.at(-1)?.id;
  const url = `${base}/v1/stream?run_id=${runId}${last === undefined ? "&from=start" : ""}`;
  try {
    const res = await fetch(url, {
      headers: { accept: "text/event-stream", ...(last === undefined ? {} : { "last-event-id": last }) },
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const parser = createParser({
      onEvent(e) {
        if (e.id === undefined) throw new Error(`an event without an id: ${e.data}`);
        got.push({ id: e.id, event: e.event, data: JSON.parse(e.data) as Sent["data"] });
        tap(got);
        if (enough(got)) controller.abort();
      },
    });
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      parser.feed(decoder.decode(chunk, { stream: true }));
    }
  } catch (e) {
    // Our own disconnect, or the server's death: the caller reconnects.
    if (!controller.signal.aborted && !(e instanceof TypeError)) throw e;
  }
}

const progressCount = (got: Sent[]) => got.filter((e) => e.data.type === "node.progress").length;

describe("a run's stream across a disconnect and a SIGKILL of skein serve", () => {
  it("resumes with Last-Event-ID: every event and chunk once, in order; the killed attempt superseded", async () => {
    const ws = workspace();
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    let server = await serve(ws.dir, ws.db, port);
    const put = await fetch(`${base}/v1/workflows/stream`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(WORKFLOW),
    });
    expect(put.status, await put.text()).toBeLessThan(300);
    const started = await fetch(`${base}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ workflow_id: "stream" }),
    });
    const runId = ((await started.json()) as { run_id: string }).run_id;

    const got: Sent[] = [];
    // 1. A subscriber that leaves mid-stream, and comes back.
    await readStream(base, runId, got, (g) => progressCount(g) >= 3);
    await readStream(base, runId, got, (g) => progressCount(g) >= 6);
    // 2. The server dies with its attempt mid-stream; the subscriber's connection ends with it.
    const dying = server;
    await readStream(
      base,
      runId,
      got,
      (g) => g.some((e) => e.data.type === "run.succeeded"),
      (g) => {
        if (progressCount(g) === 8) dying.proc.kill("SIGKILL");
      },
    );
    expect((await dying.result()).signal).toBe("SIGKILL");
    // 3. Started again: the dead engine's attempt runs again; the subscriber resumes.
    server = await serve(ws.dir, ws.db, port);
    while (!got.some((e) => e.data.type === "run.succeeded")) {
      await readStream(base, runId, got, (g) => g.some((e) => e.data.type === "run.succeeded"));
    }

    // What arrived is the stored history: every seq once, in order, no gap.
    const stored: number[] = [];
    for (let after = 0; ; ) {
      const page = (await (await fetch(`${base}/v1/runs/${runId}/events?after_seq=${after}`)).json()) as {
        events: { seq: number }[];
        next_after_seq: number | null;
      };
      stored.push(...page.events.map((e) => e.seq));
      if (page.next_after_seq === null) break;
      after = page.next_after_seq;
    }
    expect(got.map((e) => Number(e.id))).toEqual(stored);
    expect(got.map((e) => e.data.seq)).toEqual(stored);
    expect(got.filter((e) => e.data.type === "node.progress").every((e) => e.event === "node.progress")).toBe(true);

    // The first attempt's stream is superseded; the second's text is whole.
    const progress = (await (await fetch(`${base}/v1/runs/${runId}/progress`)).json()) as {
      streams: { attempt: number; text: string; superseded: boolean }[];
    };
    const [first, second] = progress.streams;
    expect(first).toMatchObject({ attempt: 1, superseded: true });
    expect(first?.text).toMatch(/^a1c0 a1c1 a1c2 /);
    expect(second).toMatchObject({
      attempt: 2,
      superseded: false,
      text: Array.from({ length: 20 }, (_, i) => `a2c${i} `).join(""),
    });
    server.proc.kill("SIGTERM");
    await server.result();
  });
});
