/**
 * /v1/schedules (DESIGN §11.5): admins write, readers read, agent and metrics tokens are refused;
 * a token scoped to workflows sees only their schedules (any other is a 404, as an unknown id);
 * a bad cron expression or time zone is a 400 with its path. GET /v1/runs?schedule_id= filters.
 */
import { describe, expect, it } from "vitest";
import type { TokenEntry } from "../../src/http/auth.js";
import { ScheduleSchema, ScheduleWithTimesSchema } from "../../src/http/schemas.js";
import { nextEvent } from "../helpers.js";
import { bearer, TOKEN_LIST, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

const METRICS = "metrics-0123456789abcdef01";
const ORDERS_ADMIN = "orders-admin-0123456789abcdef";
const ORDERS_REVIEWER = "orders-reviewer-0123456789abc";
const TOKENS_WITH_SCOPES: TokenEntry[] = [
  ...TOKEN_LIST,
  { token: METRICS, role: "metrics", name: "prometheus" },
  { token: ORDERS_ADMIN, role: "admin", name: "orders-ops", workflows: ["order-*"] },
  { token: ORDERS_REVIEWER, role: "reviewer", name: "orders-alice", workflows: ["order-*"] },
];

const HOURLY = { workflow_id: "simple", cron: "0 * * * *", timezone: "Europe/Paris", input: { n: 1 } };

async function scheduleApi() {
  const t = await testApi({ server: { tokens: TOKENS_WITH_SCOPES } });
  for (const id of ["simple", "order-eu"]) await t.engine.registerWorkflow({ ...WORKFLOWS.simple, id });
  const as = (token: string) => ({
    get: (url: string) => t.app.inject({ url, headers: bearer(token) }),
    put: (url: string, payload: object) => t.app.inject({ method: "PUT", url, headers: bearer(token), payload }),
    post: (url: string) => t.app.inject({ method: "POST", url, headers: bearer(token), payload: {} }),
    delete: (url: string) => t.app.inject({ method: "DELETE", url, headers: bearer(token) }),
  });
  return { ...t, as };
}

describe("/v1/schedules", () => {
  it("creates (201), replaces (200), lists, reads with the next 5 fire times, pauses, resumes and deletes", async () => {
    const { as, clock } = await scheduleApi();
    const admin = as(TOKENS.admin);
    const created = await admin.put("/v1/schedules/hourly", HOURLY);
    expect(created.statusCode).toBe(201);
    const schedule = ScheduleSchema.parse(created.json().schedule);
    expect(schedule).toMatchObject({
      schedule_id: "hourly",
      workflow_id: "simple",
      version: null,
      timezone: "Europe/Paris",
      overlap: "skip",
      catchup: "latest",
      catchup_limit: 100,
      paused: false,
      input: { n: 1 },
    });
    // The next top of the hour after the manual clock's start.
    expect(schedule.next_fire_at).toBe(clock.now() + 3_600_000);

    const replaced = await admin.put("/v1/schedules/hourly", { ...HOURLY, cron: "30 9 * * *" });
    expect(replaced.statusCode).toBe(200);
    expect(replaced.json().schedule.cron).toBe("30 9 * * *");

    const listed = await admin.get("/v1/schedules");
    expect(listed.statusCode).toBe(200);
    expect(listed.json().schedules.map((s: { schedule_id: string }) => s.schedule_id)).toEqual(["hourly"]);
    expect((await admin.get("/v1/schedules?workflow_id=order-eu")).json().schedules).toEqual([]);

    const read = await admin.get("/v1/schedules/hourly");
    expect(read.statusCode).toBe(200);
    const times = ScheduleWithTimesSchema.parse(read.json()).next_fire_times;
    // 09:30 in Paris is 08:30 UTC in January, every day.
    expect(times.map((t) => new Date(t).toISOString())).toEqual([
      "2026-01-01T08:30:00.000Z",
      "2026-01-02T08:30:00.000Z",
      "2026-01-03T08:30:00.000Z",
      "2026-01-04T08:30:00.000Z",
      "2026-01-05T08:30:00.000Z",
    ]);

    const paused = await admin.post("/v1/schedules/hourly/pause");
    expect(paused.statusCode).toBe(200);
    expect(paused.json().schedule).toMatchObject({ paused: true, next_fire_at: null });
    const resumed = await admin.post("/v1/schedules/hourly/resume");
    expect(resumed.statusCode).toBe(200);
    expect(resumed.json().schedule).toMatchObject({ paused: false, next_fire_at: times[0] });

    const deleted = await admin.delete("/v1/schedules/hourly");
    expect(deleted.statusCode).toBe(204);
    expect(deleted.body).toBe("");
    expect((await admin.get("/v1/schedules/hourly")).statusCode).toBe(404);
    expect((await admin.delete("/v1/schedules/hourly")).statusCode).toBe(404);
  });

  it("answers 404 for an unknown schedule on every route that names one", async () => {
    const { as } = await scheduleApi();
    const admin = as(TOKENS.admin);
    for (const response of [
      await admin.get("/v1/schedules/nope"),
      await admin.post("/v1/schedules/nope/pause"),
      await admin.post("/v1/schedules/nope/resume"),
      await admin.delete("/v1/schedules/nope"),
    ]) {
      expect(response.statusCode).toBe(404);
      expect(response.json().error.code).toBe("not_found");
      expect(response.json().error.message).toContain('"nope"');
    }
  });

  it("refuses a bad cron expression, time zone, field or id with 400 and each problem's path", async () => {
    const { as } = await scheduleApi();
    const admin = as(TOKENS.admin);
    const problems = async (url: string, body: object) => {
      const response = await admin.put(url, body);
      expect(response.statusCode).toBe(400);
      expect(response.json().error.code).toBe("validation");
      return response.json().error.details.problems as { path: string; message: string }[];
    };
    expect((await problems("/v1/schedules/s", { ...HOURLY, cron: "61 * * * *" })).map((p) => p.path)).toEqual([
      "body.cron",
    ]);
    const zone = await problems("/v1/schedules/s", { ...HOURLY, timezone: "Mars/Olympus" });
    expect(zone.map((p) => p.path)).toEqual(["body.timezone"]);
    expect(zone[0]?.message).toContain("Mars/Olympus");
    const fields = await problems("/v1/schedules/s", { ...HOURLY, overlap: "queue", catchup_limit: 0, extra: 1 });
    expect(fields.map((p) => p.path).sort()).toEqual(["body", "body.catchup_limit", "body.overlap"]);
    expect((await problems("/v1/schedules/bad id!", HOURLY)).map((p) => p.path)).toEqual(["params.schedule_id"]);
    // A workflow that is not registered: nothing is stored.
    expect((await problems("/v1/schedules/s", { ...HOURLY, workflow_id: "missing" })).length).toBeGreaterThan(0);
    expect((await admin.get("/v1/schedules")).json().schedules).toEqual([]);
  });

  it("lets admins write, readers read, and refuses agent and metrics tokens", async () => {
    const { as } = await scheduleApi();
    expect((await as(TOKENS.admin).put("/v1/schedules/hourly", HOURLY)).statusCode).toBe(201);
    const reviewer = as(TOKENS.alice);
    expect((await reviewer.get("/v1/schedules")).statusCode).toBe(200);
    expect((await reviewer.get("/v1/schedules/hourly")).statusCode).toBe(200);
    expect((await reviewer.put("/v1/schedules/hourly", HOURLY)).statusCode).toBe(403);
    expect((await reviewer.post("/v1/schedules/hourly/pause")).statusCode).toBe(403);
    expect((await reviewer.post("/v1/schedules/hourly/resume")).statusCode).toBe(403);
    expect((await reviewer.delete("/v1/schedules/hourly")).statusCode).toBe(403);
    for (const token of [TOKENS.agent, METRICS]) {
      expect((await as(token).get("/v1/schedules")).statusCode).toBe(403);
      expect((await as(token).get("/v1/schedules/hourly")).statusCode).toBe(403);
    }
    const anonymous = await as("not-a-token-0123456789abcdef").get("/v1/schedules");
    expect(anonymous.statusCode).toBe(401);
    // Nothing the refused calls asked for happened.
    expect((await reviewer.get("/v1/schedules/hourly")).json()).toMatchObject({ paused: false });
  });

  it("shows a scoped token only its workflows' schedules: others are 404, and it may not take their ids", async () => {
    const { as } = await scheduleApi();
    const admin = as(TOKENS.admin);
    await admin.put("/v1/schedules/payroll", HOURLY);
    await admin.put("/v1/schedules/orders", { ...HOURLY, workflow_id: "order-eu" });
    for (const token of [ORDERS_ADMIN, ORDERS_REVIEWER]) {
      const scoped = as(token);
      expect(
        (await scoped.get("/v1/schedules")).json().schedules.map((s: { schedule_id: string }) => s.schedule_id),
      ).toEqual(["orders"]);
      expect((await scoped.get("/v1/schedules?workflow_id=simple")).json().schedules).toEqual([]);
      expect((await scoped.get("/v1/schedules/orders")).statusCode).toBe(200);
      const hidden = await scoped.get("/v1/schedules/payroll");
      expect(hidden.statusCode).toBe(404);
      // Worded as for an id that does not exist.
      expect(hidden.json().error.message).toBe(
        (await scoped.get("/v1/schedules/nope")).json().error.message.replace("nope", "payroll"),
      );
    }
    const scopedAdmin = as(ORDERS_ADMIN);
    expect((await scopedAdmin.post("/v1/schedules/payroll/pause")).statusCode).toBe(404);
    expect((await scopedAdmin.delete("/v1/schedules/payroll")).statusCode).toBe(404);
    // Its own workflows only, and not over another workflow's schedule.
    expect((await scopedAdmin.put("/v1/schedules/mine", HOURLY)).statusCode).toBe(403);
    expect((await scopedAdmin.put("/v1/schedules/payroll", { ...HOURLY, workflow_id: "order-eu" })).statusCode).toBe(
      403,
    );
    expect((await scopedAdmin.post("/v1/schedules/orders/pause")).json().schedule.paused).toBe(true);
    // What the scoped token was refused did not happen.
    expect((await admin.get("/v1/schedules/payroll")).json()).toMatchObject({ workflow_id: "simple", paused: false });
    expect((await admin.get("/v1/schedules")).json().schedules).toHaveLength(2);
  });

  it("filters runs by the schedule that started them", async () => {
    const { as, engine, clock } = await scheduleApi();
    const admin = as(TOKENS.admin);
    const { schedule } = (await admin.put("/v1/schedules/hourly", HOURLY)).json();
    const other = await engine.startRun("simple");
    const fired = nextEvent(engine, (e) => e.type === "run.started" && e.run_id !== other.run_id);
    await clock.advance(schedule.next_fire_at - clock.now());
    const started = await fired;
    const runs = (await admin.get("/v1/runs?schedule_id=hourly")).json().runs;
    expect(runs.map((r: { run_id: string; schedule_id: string }) => [r.run_id, r.schedule_id])).toEqual([
      [started.run_id, "hourly"],
    ]);
    expect((await admin.get("/v1/runs?schedule_id=other")).json().runs).toEqual([]);
    expect((await admin.get(`/v1/runs/${other.run_id}`)).json().schedule_id).toBeNull();
    expect((await admin.get("/v1/schedules/hourly")).json().last_run_id).toBe(started.run_id);
  });
});
