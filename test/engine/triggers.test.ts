/**
 * Event triggers (DESIGN §17): publishEvent starts one run of each workflow whose latest version
 * declares the event, at most once per event idempotency key (across restarts and after the
 * inbox forgot the event), within the publisher's scope; a trigger that cannot start its run is
 * answered and logged, and holds back neither the other workflows nor the waiting runs.
 */
import { describe, expect, it } from "vitest";
import { triggerKey } from "../../src/engine/writer/engine-keys.js";
import { type Engine, type RunEvent, ValidationError, type WorkflowInput } from "../../src/index.js";
import { capturedLogger, nextEvent, onPostgres, sqlOn, testEngine } from "../helpers.js";

const DAY = 86_400_000;
/** Timers at a pace that days of ManualClock time do not fire a million times (as test/engine/prune.test.ts). */
const SLOW_TIMERS = { sweepIntervalMs: DAY / 4, heartbeatIntervalMs: DAY, engineTimeoutMs: 30 * DAY };

const echo = async (task: { input: unknown }) => task.input;

/** A one-node workflow that echoes its input, started by `triggers` (malformed ones too: the registration checks them). */
function triggered(id: string, triggers: unknown[], extra: Record<string, unknown> = {}): WorkflowInput {
  return { id, triggers, ...extra, nodes: [{ node_id: "echo", agent_type: "echo", payload: {} }] } as WorkflowInput;
}

/** A workflow waiting for `order.paid` with its input's order id as the key. */
const WAITER = {
  id: "waiter",
  nodes: [{ node_id: "paid", agent_type: "wait_event", payload: { event: "order.paid", key: "{{ input.order }}" } }],
};

const waiting = (e: RunEvent) => e.type === "node.waiting" && e.node_id === "paid";

const byWorkflow = <T extends { workflow_id: string }>(list: T[]) =>
  [...list].sort((a, b) => a.workflow_id.localeCompare(b.workflow_id));

async function runsOf(engine: Engine, workflowId: string) {
  return engine.listRuns({ workflow_id: workflowId });
}

describe("event triggers", () => {
  it("start one run of each workflow declaring the event, with its mapped input, and the waiting runs receive it too", async () => {
    const { engine } = await testEngine({ agents: { echo } });
    await engine.registerWorkflow(
      triggered("invoice", [
        { event: "order.paid", input: { order: "{{ event.key }}", total: "{{ event.payload.total }}" } },
      ]),
    );
    await engine.registerWorkflow(triggered("thank-you", [{ event: "order.paid" }]));
    await engine.registerWorkflow(triggered("refund", [{ event: "order.refunded" }]));
    await engine.registerWorkflow(WAITER);
    const parked = nextEvent(engine, waiting);
    const waiter = await engine.startRun("waiter", { input: { order: "o-1" } });
    await parked;

    const answer = await engine.publishEvent("order.paid", "o-1", { total: 12 });
    expect(answer.duplicate).toBe(false);
    expect(answer.not_started).toEqual([]);
    expect(answer.delivered_to).toEqual([{ run_id: waiter.run_id, node_id: "paid", visit: 1 }]);
    const [invoice, thanks] = byWorkflow(answer.started);
    expect(byWorkflow(answer.started).map((s) => s.workflow_id)).toEqual(["invoice", "thank-you"]);

    const invoiceRun = await engine.waitForRun(invoice?.run_id as string);
    expect(invoiceRun).toMatchObject({ status: "SUCCEEDED", input: { order: "o-1", total: 12 } });
    // Without an input, the event's payload is the run's input.
    expect(await engine.waitForRun(thanks?.run_id as string)).toMatchObject({
      status: "SUCCEEDED",
      input: { total: 12 },
    });
    expect((await engine.getRun(invoice?.run_id as string)).triggered_by).toEqual({
      event: "order.paid",
      key: "o-1",
      event_id: answer.event_id,
      idempotency_key: answer.event_id,
    });
    const started = (await engine.listEvents(invoice?.run_id as string)).find((e) => e.type === "run.started");
    expect(started?.data).toMatchObject({ triggered_by: { event: "order.paid", key: "o-1" }, trigger: 0 });
    expect(await runsOf(engine, "refund")).toEqual([]);
    expect((await engine.waitForRun(waiter.run_id)).output).toEqual({ paid: { total: 12 } });
    // A run started otherwise says so.
    expect((await engine.getRun(waiter.run_id)).triggered_by).toBeNull();
  });

  it("start each workflow once per idempotency key: published again, across a restart, and after the inbox forgot the event", async () => {
    const first = await testEngine({ agents: { echo }, ...SLOW_TIMERS });
    await first.engine.registerWorkflow(triggered("invoice", [{ event: "order.paid" }]));
    await first.engine.registerWorkflow(triggered("thank-you", [{ event: "order.paid" }]));
    const answer = await first.engine.publishEvent("order.paid", "o-1", { n: 1 }, { idempotency_key: "pay-1" });
    expect(answer.started).toHaveLength(2);
    const again = await first.engine.publishEvent("order.paid", "o-1", { n: 1 }, { idempotency_key: "pay-1" });
    expect(again).toEqual({ ...answer, delivered_to: [], duplicate: true });

    await first.engine.close();
    const { engine, clock } = await testEngine({
      agents: { echo },
      ...SLOW_TIMERS,
      database: first.database,
      clock: first.clock,
    });
    const restarted = await engine.publishEvent("order.paid", "o-1", { n: 1 }, { idempotency_key: "pay-1" });
    expect(restarted.duplicate).toBe(true);
    expect(byWorkflow(restarted.started)).toEqual(byWorkflow(answer.started));

    // Two days on, another publish prunes the event (events by key are kept a day): the same
    // event is new to the inbox again, but each trigger's run is found under its key.
    await clock.advance(2 * DAY);
    await engine.publishEvent("other", "x", null);
    const forgotten = await engine.publishEvent("order.paid", "o-1", { n: 1 }, { idempotency_key: "pay-1" });
    expect(forgotten.duplicate).toBe(false);
    expect(byWorkflow(forgotten.started)).toEqual(byWorkflow(answer.started));
    for (const id of ["invoice", "thank-you"]) expect(await runsOf(engine, id)).toHaveLength(1);

    // Another idempotency key is another event; without one, each publish is.
    const other = await engine.publishEvent("order.paid", "o-1", { n: 1 }, { idempotency_key: "pay-2" });
    expect(other.started.map((s) => s.run_id)).not.toContain(answer.started[0]?.run_id);
    await engine.publishEvent("order.paid", "o-1", { n: 1 });
    await engine.publishEvent("order.paid", "o-1", { n: 1 });
    for (const id of ["invoice", "thank-you"]) expect(await runsOf(engine, id)).toHaveLength(4);
  });

  it("fire for their key only, the first matching trigger making the input; the latest version's triggers count", async () => {
    const { engine } = await testEngine({ agents: { echo } });
    await engine.registerWorkflow(
      triggered("vip", [
        { event: "order.paid", key: "gold", input: { tier: "gold" } },
        { event: "order.paid", input: { tier: "any" } },
      ]),
    );
    await engine.registerWorkflow(triggered("gold-only", [{ event: "order.paid", key: "gold" }]));

    const regular = await engine.publishEvent("order.paid", "silver", {});
    expect(regular.started.map((s) => s.workflow_id)).toEqual(["vip"]);
    expect((await engine.getRun(regular.started[0]?.run_id as string)).input).toEqual({ tier: "any" });
    const gold = await engine.publishEvent("order.paid", "gold", {});
    expect(byWorkflow(gold.started).map((s) => s.workflow_id)).toEqual(["gold-only", "vip"]);
    const vip = gold.started.find((s) => s.workflow_id === "vip");
    expect((await engine.getRun(vip?.run_id as string)).input).toEqual({ tier: "gold" });

    // Version 2 no longer declares the event: version 1's trigger does not fire either.
    await engine.registerWorkflow(triggered("gold-only", [{ event: "order.shipped" }]));
    const later = await engine.publishEvent("order.paid", "gold", {});
    expect(later.started.map((s) => s.workflow_id)).toEqual(["vip"]);
    const shipped = await engine.publishEvent("order.shipped", "gold", {});
    expect(shipped.started).toMatchObject([{ workflow_id: "gold-only", workflow_version: 2 }]);
  });

  it("start only workflows the publisher's scope covers, and the run records that scope", async () => {
    const { engine } = await testEngine({ agents: { echo } });
    await engine.registerWorkflow(triggered("billing-invoice", [{ event: "order.paid" }]));
    await engine.registerWorkflow(triggered("shipping-label", [{ event: "order.paid" }]));
    const answer = await engine.publishEvent("order.paid", "o-1", {}, { scope: ["billing-*"] });
    // The workflow outside the scope is passed over without a word: a scoped publisher does not see it.
    expect(answer.started.map((s) => s.workflow_id)).toEqual(["billing-invoice"]);
    expect(answer.not_started).toEqual([]);
    expect(await runsOf(engine, "shipping-label")).toEqual([]);
    expect((await engine.getRun(answer.started[0]?.run_id as string)).scope).toEqual(["billing-*"]);
  });

  it("a trigger whose input the input_schema refuses, or whose template fails, is reported; the others start and the waits receive the event", async () => {
    const { logger, lines } = capturedLogger();
    const { engine } = await testEngine({ agents: { echo }, logger });
    const schema = {
      type: "object",
      properties: { total: { type: "number" } },
      required: ["total"],
    };
    await engine.registerWorkflow(
      triggered("strict", [{ event: "order.paid", input: { total: "{{ event.payload.total }}" } }], {
        input_schema: schema,
      }),
    );
    await engine.registerWorkflow(
      triggered("parse", [{ event: "order.paid", input: { n: "{{ $number(event.payload.total) }}" } }]),
    );
    await engine.registerWorkflow(triggered("lenient", [{ event: "order.paid" }]));
    await engine.registerWorkflow(WAITER);
    const parked = nextEvent(engine, waiting);
    const waiter = await engine.startRun("waiter", { input: { order: "o-1" } });
    await parked;

    const answer = await engine.publishEvent("order.paid", "o-1", { total: "twelve" });
    expect(answer.started.map((s) => s.workflow_id)).toEqual(["lenient"]);
    expect(answer.delivered_to.map((d) => d.run_id)).toEqual([waiter.run_id]);
    const [parse, strict] = byWorkflow(answer.not_started);
    expect(strict).toMatchObject({
      workflow_id: "strict",
      workflow_version: 1,
      trigger: 0,
      reason: "input_invalid",
      problems: [{ path: "input.total", message: "must be number" }],
    });
    expect(strict?.message).toMatch(
      /^the input triggers\[0\] made of event "order.paid" does not match the input_schema of strict: input.total: must be number/,
    );
    expect(parse).toMatchObject({ workflow_id: "parse", trigger: 0, reason: "input_failed" });
    expect(parse?.problems).toEqual([{ path: "triggers[0].input.n", message: expect.stringContaining("$number") }]);
    expect(await runsOf(engine, "strict")).toEqual([]);
    expect((await engine.waitForRun(waiter.run_id)).output).toEqual({ paid: { total: "twelve" } });
    const logged = lines.filter((l) => l.msg.includes("a trigger did not start a run"));
    expect(logged.map((l) => l.workflow_id).sort()).toEqual(["parse", "strict"]);
    expect(logged[0]).toMatchObject({ event: "order.paid", key: "o-1", event_id: answer.event_id });

    // The same event again is a duplicate: nothing is refused (or logged) twice.
    const fits = await engine.publishEvent("order.paid", "o-2", { total: 12 }, { idempotency_key: "k" });
    expect(byWorkflow(fits.started).map((s) => s.workflow_id)).toEqual(["lenient", "parse", "strict"]);
    const dup = await engine.publishEvent("order.paid", "o-2", { total: 12 }, { idempotency_key: "k" });
    expect(byWorkflow(dup.started)).toEqual(byWorkflow(fits.started));
  });

  it("do not take a run the engine did not start under a trigger's key for it", async () => {
    const { engine, database } = await testEngine({ agents: { echo } });
    await engine.registerWorkflow(triggered("invoice", [{ event: "order.paid" }]));
    await engine.registerWorkflow(triggered("thank-you", [{ event: "order.paid" }]));
    // A run written under the key by hand (as an older Skein or an operator might have).
    const planted = await engine.waitForRun((await engine.startRun("invoice", { input: {} })).run_id);
    const key = triggerKey("invoice", { event: "order.paid", key: "o-1", idempotency_key: "pay-1" });
    await sqlOn(database, "UPDATE runs SET idempotency_key = $1 WHERE run_id = $2", [key, planted.run_id]);

    const answer = await engine.publishEvent("order.paid", "o-1", {}, { idempotency_key: "pay-1" });
    expect(answer.started.map((s) => s.workflow_id)).toEqual(["thank-you"]);
    expect(answer.not_started).toEqual([
      {
        workflow_id: "invoice",
        workflow_version: 1,
        trigger: 0,
        reason: "idempotency_key_taken",
        message: expect.stringContaining(
          `is held by run ${planted.run_id} (of invoice), which is not the run a trigger`,
        ),
        problems: [],
      },
    ]);
    expect(await runsOf(engine, "invoice")).toHaveLength(1);
  });

  it("registration refuses a malformed trigger, each problem at its path", async () => {
    const { engine } = await testEngine();
    const refused = async (triggers: unknown[], extra: Record<string, unknown> = {}) => {
      const e = await engine.registerWorkflow(triggered("bad", triggers, extra)).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(ValidationError);
      return (e as ValidationError).problems;
    };
    expect(await refused([{ event: "" }, { key: "k" }, { event: "x", extra: 1 }])).toEqual([
      { path: "triggers[0].event", message: expect.stringMatching(/empty/) },
      { path: "triggers[1].event", message: expect.stringMatching(/required|missing/) },
      { path: "triggers[2]", message: 'unknown field "extra"' },
    ]);
    expect(await refused([{ event: "paid" }, { event: "paid", key: "gold" }])).toEqual([
      {
        path: "triggers[1]",
        message: expect.stringMatching(/^never fires: triggers\[0\] takes every "paid" event first/),
      },
    ]);
    expect(
      await refused([
        { event: "paid", key: "a" },
        { event: "paid", key: "a" },
      ]),
    ).toEqual([
      {
        path: "triggers[1]",
        message: 'duplicate trigger: triggers[0] already takes "paid" events with key "a"; remove one',
      },
    ]);
    expect(await refused([{ event: "paid", input: { a: "{{ nodes.echo.output }}" } }])).toEqual([
      {
        path: "triggers[0].input.a",
        message: expect.stringMatching(/^reads nodes\.echo, but a trigger's input is worked out from the event/),
      },
    ]);
    expect(await refused([{ event: "paid", input: { b: "{{ secrets.TOKEN }}", c: "{{ ( }}" } }])).toEqual([
      { path: "triggers[0].input.b", message: expect.stringMatching(/secrets may not be read in a trigger's input/) },
      { path: "triggers[0].input.c", message: expect.stringMatching(/^cannot parse/) },
    ]);
    // An input without templates is the same for every event: the input_schema must take it.
    const schema = { type: "object", properties: { total: { type: "number" } } };
    expect(await refused([{ event: "paid", input: { total: "x" } }], { input_schema: schema })).toEqual([
      {
        path: "triggers[0].input.total",
        message: expect.stringMatching(/^must be number: the workflow's input_schema refuses/),
      },
    ]);
    expect((await engine.checkWorkflow(triggered("bad", [{ event: "" }]))).errors).toMatchObject([
      { path: "triggers[0].event" },
    ]);
    await expect(engine.getWorkflow("bad")).rejects.toThrow(/not registered/);
  });
});

describe.skipIf(!onPostgres)("event triggers across engines sharing a PostgreSQL database", () => {
  it("two engines publishing the same event at once start each workflow once, and both are answered", async () => {
    const log = capturedLogger();
    const a = await testEngine({ agents: { echo }, logger: log.logger });
    const b = await testEngine({ agents: { echo }, database: a.database, clock: a.clock, logger: log.logger });
    await a.engine.registerWorkflow(triggered("invoice", [{ event: "order.paid" }]));
    await a.engine.registerWorkflow(triggered("thank-you", [{ event: "order.paid" }]));
    for (let n = 0; n < 5; n++) {
      const publish = (e: Engine) => e.publishEvent("order.paid", `o-${n}`, { n }, { idempotency_key: `pay-${n}` });
      const answers = await Promise.all([publish(a.engine), publish(b.engine), publish(a.engine), publish(b.engine)]);
      // One publish is the event's; the others are duplicates of it, answered with its runs.
      expect(answers.filter((x) => !x.duplicate)).toHaveLength(1);
      const runs = answers.map((x) => byWorkflow(x.started).map((s) => s.run_id));
      for (const r of runs) expect(r).toEqual(runs[0]);
      expect(runs[0]).toHaveLength(2);
    }
    for (const id of ["invoice", "thank-you"]) expect(await runsOf(a.engine, id)).toHaveLength(5);
    // An event no workflow declares is kept once too.
    const answers = await Promise.all(
      [a, b, a, b].map(({ engine }) =>
        engine.publishEvent("order.shipped", "o-1", null, { idempotency_key: "ship-1" }),
      ),
    );
    expect(answers.filter((x) => !x.duplicate)).toHaveLength(1);
    expect(new Set(answers.map((x) => x.event_id)).size).toBe(1);
    // A race the engines expect (tried again, quietly), not a statement that failed.
    expect(log.lines.filter((l) => l.level >= 50)).toEqual([]);
  });
});
