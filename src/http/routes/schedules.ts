/**
 * Schedules (DESIGN §11.5): list, read with the next fire times, create or replace (PUT), pause,
 * resume, delete. Admins write; readers read. A token scoped to workflows sees only schedules of
 * those workflows: any other is answered 404, as an unknown id.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Engine } from "../../engine/engine.js";
import { unknownSchedule } from "../../engine/schedules.js";
import { ForbiddenError, ValidationError } from "../../errors.js";
import type { ScheduleInput } from "../../index.js";
import { ADMINS, READERS } from "../auth.js";
import type { RouteContext } from "../context.js";
import { hasCode } from "../errors.js";
import type { Principal } from "../principal.js";
import {
  errorResponses,
  ScheduleInputSchema,
  ScheduleParams,
  ScheduleSchema,
  ScheduleWithTimesSchema,
} from "../schemas.js";
import { inScope } from "../scope.js";

const ListQuery = z
  .object({ workflow_id: z.string().min(1).max(200).optional().describe("only this workflow's schedules") })
  .strict();
const Answer = z.object({ schedule: ScheduleSchema });

type Params = z.output<typeof ScheduleParams>;

export function registerScheduleRoutes(app: FastifyInstance, { engine }: RouteContext): void {
  app.get<{ Querystring: z.output<typeof ListQuery> }>(
    "/v1/schedules",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "listSchedules",
        tags: ["schedules"],
        summary: "Schedules by schedule_id, each with its next fire time",
        querystring: ListQuery,
        response: { ...errorResponses(503), 200: z.object({ schedules: z.array(ScheduleSchema) }) },
      },
    },
    async (request) => {
      const { workflow_id } = request.query;
      const schedules = await engine.listSchedules(workflow_id === undefined ? {} : { workflow_id });
      return { schedules: schedules.filter((s) => inScope(request.principal, s.workflow_id)) };
    },
  );

  app.get<{ Params: Params }>(
    "/v1/schedules/:schedule_id",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "getSchedule",
        tags: ["schedules"],
        summary: "A schedule with its next 5 fire times",
        params: ScheduleParams,
        response: { ...errorResponses(404, 503), 200: ScheduleWithTimesSchema },
      },
    },
    async (request) => {
      const schedule = await engine.getSchedule(request.params.schedule_id);
      assertScheduleInScope(request.principal, schedule);
      return schedule;
    },
  );

  app.put<{ Params: Params; Body: z.output<typeof ScheduleInputSchema> }>(
    "/v1/schedules/:schedule_id",
    {
      config: { access: ADMINS, scoped: true },
      schema: {
        operationId: "putSchedule",
        tags: ["schedules"],
        summary: "Create a schedule (201) or replace it (200); the cron expression and time zone are checked",
        params: ScheduleParams,
        body: ScheduleInputSchema,
        response: { ...errorResponses(503), 200: Answer, 201: Answer },
      },
    },
    async (request, reply) => {
      const { schedule_id } = request.params;
      const { principal } = request;
      if (!inScope(principal, request.body.workflow_id)) {
        throw new ForbiddenError(
          `this token may not schedule workflow "${request.body.workflow_id}": it is scoped to ${principal?.workflows?.patterns.join(", ")}`,
        );
      }
      // Replacing a schedule of a workflow out of scope would take it over.
      if (principal?.workflows) {
        const existing = await findSchedule(engine, schedule_id);
        if (existing && !inScope(principal, existing.workflow_id)) {
          throw new ForbiddenError(
            `this token may not replace schedule "${schedule_id}": the id is taken by a schedule outside its scope; choose another id`,
          );
        }
      }
      // The body is JSON (json-text.ts), so its input is a Json value.
      const input = { schedule_id, ...withoutUndefined(request.body) } as ScheduleInput;
      // Its runs, and their children, may start only what the token may (DESIGN §13.1).
      const scope = principal?.workflows ? { scope: principal.workflows.patterns } : {};
      const { schedule, created } = await engine.putSchedule(input, scope).catch((e: unknown) => {
        throw asBodyProblems(e);
      });
      return reply.code(created ? 201 : 200).send({ schedule });
    },
  );

  for (const action of ["pause", "resume"] as const) {
    app.post<{ Params: Params }>(
      `/v1/schedules/:schedule_id/${action}`,
      {
        config: { access: ADMINS, scoped: true },
        schema: {
          operationId: `${action}Schedule`,
          tags: ["schedules"],
          summary:
            action === "pause"
              ? "Pause a schedule: no slot fires until it is resumed (pausing a paused one changes nothing)"
              : "Resume a schedule from the next slot after now: slots that passed while it was paused never fire",
          params: ScheduleParams,
          response: { ...errorResponses(404, 503), 200: Answer },
        },
      },
      async (request) => {
        const { schedule_id } = request.params;
        await checkScheduleScope(engine, request.principal, schedule_id);
        const schedule =
          action === "pause" ? await engine.pauseSchedule(schedule_id) : await engine.resumeSchedule(schedule_id);
        return { schedule };
      },
    );
  }

  app.delete<{ Params: Params }>(
    "/v1/schedules/:schedule_id",
    {
      config: { access: ADMINS, scoped: true },
      schema: {
        operationId: "deleteSchedule",
        tags: ["schedules"],
        summary: "Delete a schedule (the runs it started keep their schedule_id)",
        params: ScheduleParams,
        response: { ...errorResponses(404, 503), 204: z.null().describe("deleted") },
      },
    },
    async (request, reply) => {
      const { schedule_id } = request.params;
      await checkScheduleScope(engine, request.principal, schedule_id);
      await engine.deleteSchedule(schedule_id);
      return reply.code(204).send();
    },
  );
}

/** @throws NotFoundError, worded as for an unknown schedule, when the schedule is out of the token's scope */
function assertScheduleInScope(principal: Principal | null, schedule: { schedule_id: string; workflow_id: string }) {
  // The library's own words for an unknown id, so a scoped token cannot tell the two apart.
  if (!inScope(principal, schedule.workflow_id)) throw unknownSchedule(schedule.schedule_id);
}

/** Reads the schedule only for a scoped token. @throws NotFoundError when such a token may not see it */
async function checkScheduleScope(engine: Engine, principal: Principal | null, scheduleId: string): Promise<void> {
  if (principal?.workflows) assertScheduleInScope(principal, await engine.getSchedule(scheduleId));
}

async function findSchedule(engine: Engine, scheduleId: string) {
  return engine.getSchedule(scheduleId).catch((e: unknown) => {
    if (hasCode(e, "not_found")) return null;
    throw e;
  });
}

/** The library names the fields of the schedule (`cron`); here they are the request body's (`body.cron`). */
function asBodyProblems(e: unknown): unknown {
  if (!hasCode(e, "validation")) return e;
  const problems = e.problems.map((p) => ({ ...p, path: p.path === "" ? "body" : `body.${p.path}` }));
  return new ValidationError((e.message.split("\n")[0] ?? "").replace(/:$/, ""), problems);
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
