/**
 * Retention (DESIGN §8): how long finished runs are kept, and pruning them a batch at a time.
 * Ages are durations: seconds, or text such as "90s", "45m", "12h", "30d".
 */
import type { Logger } from "pino";
import type { Clock } from "../clock.js";
import { ValidationError } from "../errors.js";
import type { PruneCut, PrunedStatus, Store } from "../store/store.js";

/** A duration: seconds, or a whole number followed by s, m, h or d ("30d"). */
export type Duration = number | string;

/** How long finished runs of each status are kept; a status left out is kept for ever. */
export interface RetentionOptions {
  succeeded?: Duration;
  failed?: Duration;
  cancelled?: Duration;
}

/** Ages in ms by status: what a prune deletes once it knows the time. */
export type RetentionAges = Partial<Record<PrunedStatus, number>>;

/** Runs per prune transaction: short enough that no flush waits long behind one. */
export const PRUNE_BATCH = 500;

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A duration in ms. @throws ValidationError naming `where` for anything but a non-negative
 * number of seconds or "<whole number><s|m|h|d>".
 */
export function parseDuration(value: unknown, where: string): number {
  if (typeof value === "number" && Number.isFinite(value) && value >= 0) return Math.round(value * 1000);
  const match = typeof value === "string" ? /^(\d+)([smhd])$/.exec(value.trim()) : null;
  if (match) return Number(match[1]) * (UNIT_MS[match[2] as string] as number);
  throw new ValidationError(
    `${where} must be a duration: a number of seconds (>= 0) or text such as "90s", "45m", "12h", "30d"; got ${JSON.stringify(value) ?? String(value)}`,
  );
}

const STATUS_OF: Record<keyof RetentionOptions, PrunedStatus> = {
  succeeded: "SUCCEEDED",
  failed: "FAILED",
  cancelled: "CANCELLED",
};

/** The engine option `retention` as ages, or null when it keeps everything. @throws ValidationError */
export function retentionAges(option: unknown): RetentionAges | null {
  if (option === undefined) return null;
  if (option === null || typeof option !== "object" || Array.isArray(option)) {
    throw new ValidationError(
      'retention must be an object such as { succeeded: "30d", failed: "90d", cancelled: "30d" } (each optional)',
    );
  }
  const ages: RetentionAges = {};
  for (const [key, value] of Object.entries(option)) {
    const status = STATUS_OF[key as keyof RetentionOptions];
    if (!status) {
      throw new ValidationError(
        `retention.${key} is not a status runs are pruned in: use succeeded, failed or cancelled`,
      );
    }
    if (value !== undefined) ages[status] = parseDuration(value, `retention.${key}`);
  }
  return Object.keys(ages).length > 0 ? ages : null;
}

/** One prune transaction: the cut from the transaction's time (the database's on PostgreSQL). */
export function pruneOnce(
  store: Store,
  clock: Clock,
  ages: RetentionAges,
  options: { dryRun?: boolean; limit?: number } = {},
): Promise<number> {
  return store.transaction(async (tx) => {
    const now = (await tx.now()) ?? clock.now();
    const cut: PruneCut = {};
    for (const [status, age] of Object.entries(ages) as [PrunedStatus, number][]) cut[status] = now - age;
    return options.dryRun ? tx.countPrunable(cut) : tx.pruneRuns(cut, options.limit ?? PRUNE_BATCH);
  });
}

/**
 * The engine's retention: one batch per tick of its own timer (the sweep interval), never two
 * at once, so pruning a large backlog takes many short transactions between the flushes.
 */
export class Retention {
  private timer: ReturnType<Clock["setTimeout"]> | null = null;
  private stopped = false;
  /** The batch in progress (tests wait for it). */
  running: Promise<number> | null = null;

  constructor(
    private readonly o: { store: Store; clock: Clock; ages: RetentionAges; intervalMs: number; logger: Logger },
  ) {}

  start(): void {
    this.arm();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) this.o.clock.clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  private arm(): void {
    if (this.stopped) return;
    this.timer = this.o.clock.setTimeout(() => {
      this.timer = null;
      this.running = pruneOnce(this.o.store, this.o.clock, this.o.ages)
        .then((pruned) => {
          if (pruned > 0) this.o.logger.info({ pruned }, "skein: pruned finished runs past their retention");
          return pruned;
        })
        .catch((err) => {
          this.o.logger.error({ err }, "skein: pruning finished runs failed; trying again at the next sweep");
          return 0;
        })
        .finally(() => this.arm());
    }, this.o.intervalMs);
  }
}

/** What `pruneRuns` deletes: finished runs that ended longer ago than `olderThan`. */
export interface PruneOptions {
  /** Seconds, or text such as `"30d"`. */
  olderThan: Duration;
  /** Statuses to prune. @defaultValue all three: SUCCEEDED, FAILED, CANCELLED */
  statuses?: readonly PrunedStatus[];
  /** Count what would go, deleting nothing. */
  dryRun?: boolean;
  /** Runs per transaction (whole trees: a run with many children goes in one). @defaultValue 500 */
  batchSize?: number;
}

/** Engine.pruneRuns: batches until none is left, or with `dryRun` a count. @throws ValidationError */
export async function pruneRuns(store: Store, clock: Clock, options: PruneOptions): Promise<number> {
  const age = parseDuration(options.olderThan, "olderThan");
  const statuses = options.statuses ?? ["SUCCEEDED", "FAILED", "CANCELLED"];
  const ages: RetentionAges = {};
  for (const status of statuses) {
    if (status !== "SUCCEEDED" && status !== "FAILED" && status !== "CANCELLED") {
      throw new ValidationError(`statuses: ${JSON.stringify(status)} is not SUCCEEDED, FAILED or CANCELLED`);
    }
    ages[status] = age;
  }
  const limit = options.batchSize ?? PRUNE_BATCH;
  if (!Number.isInteger(limit) || limit < 1) {
    throw new ValidationError(`batchSize must be a whole number of runs >= 1; got ${String(options.batchSize)}`);
  }
  if (options.dryRun) return pruneOnce(store, clock, ages, { dryRun: true });
  let total = 0;
  for (;;) {
    const pruned = await pruneOnce(store, clock, ages, { limit });
    if (pruned === 0) return total;
    total += pruned;
  }
}
