/**
 * What `putSchedule` accepts (DESIGN §11.5): the fields and their defaults, checked field by
 * field with paths. The HTTP body of `PUT /v1/schedules/{id}` is the same without schedule_id
 * (`scheduleFieldsSchema`).
 */
import { z } from "zod";
import type { Catchup, Overlap } from "../core/types.js";

export const OVERLAPS = ["skip", "allow", "cancel_previous"] as const satisfies readonly Overlap[];
export const CATCHUPS = ["none", "latest", "all"] as const satisfies readonly Catchup[];

/** What a schedule_id may be: it is part of its runs' idempotency keys and of URLs. */
export const SCHEDULE_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;

export const DEFAULT_CATCHUP_LIMIT = 100;
export const MAX_CATCHUP_LIMIT = 1000;

/** A schedule's fields but its id (the HTTP body). */
export const scheduleFieldsSchema = z.strictObject({
  workflow_id: z.string().min(1),
  version: z.number().int().min(1).optional(),
  cron: z.string(),
  timezone: z.string().optional(),
  input: z.unknown().optional(),
  overlap: z.enum(OVERLAPS).optional(),
  catchup: z.enum(CATCHUPS).optional(),
  catchup_limit: z.number().int().min(1).max(MAX_CATCHUP_LIMIT).optional(),
  paused: z.boolean().optional(),
});

export const scheduleInputSchema = scheduleFieldsSchema.extend({
  schedule_id: z
    .string()
    .regex(
      SCHEDULE_ID_PATTERN,
      "must be 1 to 128 characters of letters, digits and _ . : - (it names the schedule's runs)",
    ),
});
