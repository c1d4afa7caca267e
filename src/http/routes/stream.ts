/**
 * Server-Sent Events of the event log, for live views: every event this engine commits (or one
 * run's), one `data:` line of JSON each with the event's `seq` as its id. For one run, the events
 * after `after` (alias `after_seq`; or the `Last-Event-ID` a reconnecting EventSource sends) are
 * replayed from the database first (Engine.subscribe with `from`), then live ones follow without
 * a gap or a repeat; `cursor` (an `id:` sent) and `from=start` (the whole history) say the same
 * in the words skein/client uses. A comment every 15 s keeps
 * proxies from closing an idle stream. A token scoped to workflows gets only their runs' events.
 * Progress of running attempts (`node.progress`, never stored) comes as `event: node.progress`
 * with no `id:`, so a reconnect's Last-Event-ID still names the last stored event. Writes are
 * coalesced per turn of the event loop: a chatty stream costs one socket write per turn.
 * Streams are capped per token and in total (limits.ts): over a cap, 429 or 503 with Retry-After.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { LiveEvent } from "../../core/types.js";
import type { Engine } from "../../engine/engine.js";
import { ValidationError } from "../../errors.js";
import { READERS } from "../auth.js";
import type { RouteContext } from "../context.js";
import { errorResponses } from "../schemas.js";
import { assertRunInScope, childIdsOf, hideRuns, type WorkflowScope } from "../scope.js";

const StreamQuery = z
  .object({
    run_id: z.string().min(1).max(200).optional().describe("only this run's events"),
    after: z.coerce
      .number()
      .int()
      .min(0)
      .optional()
      .describe(
        "with run_id: first replay the run's stored events with a seq greater than this (exclusive, like Last-Event-ID; 0: the whole history), then live ones. With a Last-Event-ID header too (an EventSource reconnecting to this URL), the later of the two",
      ),
    after_seq: z.coerce
      .number()
      .int()
      .min(0)
      .optional()
      .describe("the older name of `after` (the same meaning; not both)"),
    cursor: z
      .string()
      .regex(/^\d+$/)
      .optional()
      .describe("with run_id: resume just after this cursor (an `id:` this stream sent; opaque), like Last-Event-ID"),
    from: z.literal("start").optional().describe("with run_id: `start` replays the run's whole stream first"),
  })
  .strict();

/** A client this far behind is dropped (it reconnects with Last-Event-ID and replays what it missed). */
const MAX_BUFFERED_BYTES = 1024 * 1024;
/** Runs whose workflow the scoped streams remember (the oldest are forgotten, and read again if needed). */
const REMEMBERED_RUNS = 10_000;

export function registerStreamRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const { engine } = ctx;
  const runWorkflows = new RunWorkflows(engine);
  app.get<{ Querystring: z.output<typeof StreamQuery> }>(
    "/v1/stream",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "streamEvents",
        tags: ["events"],
        summary:
          "Server-Sent Events: each stored event as `id: <seq>` and `data: <event JSON>`; running attempts' progress as `event: node.progress` and `data:`, without an id",
        querystring: StreamQuery,
        response: {
          ...errorResponses(404, 429, 503),
          200: { content: { "text/event-stream": { schema: z.string() } } },
        },
      },
    },
    async (request, reply) => {
      const { run_id } = request.query;
      const after = replayStart(request.query, request.headers["last-event-id"]);
      // 404 before the stream starts.
      if (run_id !== undefined) assertRunInScope(request.principal, await engine.getRun(run_id));
      const res = reply.raw;
      // A client gone while the run was read has already had its 'close': a slot taken now would never return.
      if (res.destroyed) {
        reply.hijack();
        return;
      }
      const release = ctx.streamSlots.take(request.principal);

      reply.hijack();
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache, no-transform",
        connection: "keep-alive",
        "x-accel-buffering": "no",
      });
      res.write(": connected\n\n");
      ctx.streams.add(res);

      let lastSent = after ?? -1;
      let unwritten = "";
      let writeQueued = false;
      const writeOut = () => {
        writeQueued = false;
        const text = unwritten;
        unwritten = "";
        if (res.writableEnded || res.destroyed) return;
        res.write(text);
        if (res.writableLength > MAX_BUFFERED_BYTES) {
          request.log.warn({ run_id }, "event stream client too slow: closed");
          // Destroyed, not ended: an end waits for a client that reads nothing to take the buffer.
          res.destroy();
        }
      };
      const send = (e: LiveEvent) => {
        if (res.writableEnded) return;
        if (e.type === "node.progress") unwritten += `event: node.progress\ndata: ${JSON.stringify(e)}\n\n`;
        else {
          if (e.seq <= lastSent) return;
          lastSent = e.seq;
          unwritten += `id: ${e.seq}\ndata: ${JSON.stringify(e)}\n\n`;
        }
        if (!writeQueued) {
          writeQueued = true;
          setImmediate(writeOut);
        }
      };
      const scope = request.principal?.workflows;
      const deliver = scope && run_id === undefined ? runWorkflows.filter(scope, send) : send;
      // With a start, the engine replays the stored events (a page at a time) before live ones, each once.
      const unsubscribe = engine.subscribe(
        deliver,
        run_id === undefined
          ? {}
          : after === undefined
            ? { run_id }
            : {
                run_id,
                from: after + 1,
                onError: (err) => {
                  request.log.error({ err, run_id }, "event stream replay failed");
                  res.end();
                },
              },
      );
      // Never after the end (a write then is an 'error' event nobody listens to: the process would crash).
      const heartbeat = setInterval(() => {
        if (!res.writableEnded && !res.destroyed) res.write(": heartbeat\n\n");
      }, ctx.heartbeatMs);
      res.on("close", () => {
        clearInterval(heartbeat);
        unsubscribe();
        release();
        ctx.streams.delete(res);
      });
    },
  );
}

/**
 * The seq after which a run's stream replays: `after` (or its alias `after_seq`; both at once
 * are refused, as which one was meant is unclear) and a reconnecting EventSource's Last-Event-ID,
 * the later of them (what the client already has); undefined: live events only.
 */
function replayStart(
  query: {
    run_id?: string | undefined;
    after?: number | undefined;
    after_seq?: number | undefined;
    cursor?: string | undefined;
    from?: "start" | undefined;
  },
  lastEventIdHeader: string | string[] | undefined,
): number | undefined {
  if (query.after !== undefined && query.after_seq !== undefined) {
    throw new ValidationError("Invalid request query", [
      { path: "query.after_seq", message: "is the older name of after: pass one of them, not both" },
    ]);
  }
  // cursor and from=start: the stream contract skein/client speaks (a cursor is a seq today).
  const fromCursor = query.cursor !== undefined ? Number(query.cursor) : query.from === "start" ? 0 : undefined;
  const given = query.after ?? query.after_seq ?? fromCursor;
  if (given !== undefined && query.run_id === undefined) {
    const name =
      query.after !== undefined
        ? "after"
        : query.after_seq !== undefined
          ? "after_seq"
          : query.cursor !== undefined
            ? "cursor"
            : "from";
    throw new ValidationError("Invalid request query", [
      { path: `query.${name}`, message: "needs run_id: only one run's events can be replayed" },
    ]);
  }
  const lastEventId = Number(lastEventIdHeader);
  const resumed =
    typeof lastEventIdHeader === "string" &&
    lastEventIdHeader.trim() !== "" &&
    Number.isSafeInteger(lastEventId) &&
    lastEventId >= 0;
  if (given === undefined) return resumed ? lastEventId : undefined;
  return resumed ? Math.max(given, lastEventId) : given;
}

/** The workflow of each run seen on a scoped stream, remembered for all of them. */
class RunWorkflows {
  private readonly known = new Map<string, Promise<string | null>>();

  constructor(private readonly engine: Engine) {}

  /** `send`, given only events of runs in `scope`, in their order (a lookup holds back later events). */
  filter(scope: WorkflowScope, send: (e: LiveEvent) => void): (e: LiveEvent) => void {
    let chain = Promise.resolve();
    return (e) => {
      const workflow = this.of(e);
      chain = chain.then(async () => {
        const id = await workflow;
        if (id === null || !scope.allows(id)) return;
        // A child it names (a holder, a child's failure) may be out of scope: its id is hidden.
        const hidden: string[] = [];
        for (const child of childIdsOf(e.data)) {
          const childWorkflow = await this.workflowOf(child, undefined);
          if (childWorkflow === null || !scope.allows(childWorkflow)) hidden.push(child);
        }
        send(hideRuns(e, hidden));
      });
    };
  }

  private of(e: LiveEvent): Promise<string | null> {
    return this.workflowOf(e.run_id, e.type === "run.started" ? e.data.workflow_id : undefined);
  }

  private workflowOf(runId: string, started: unknown): Promise<string | null> {
    let found = this.known.get(runId);
    if (found === undefined) {
      // A run that cannot be read (pruned, or the database is down) shows nothing to a scoped stream.
      found =
        typeof started === "string"
          ? Promise.resolve(started)
          : this.engine.getRun(runId).then(
              (run) => run.workflow_id,
              () => {
                this.known.delete(runId); // read again next time
                return null;
              },
            );
      this.known.set(runId, found);
      if (this.known.size > REMEMBERED_RUNS) {
        const oldest = this.known.keys().next().value;
        if (oldest !== undefined) this.known.delete(oldest);
      }
    }
    return found;
  }
}
