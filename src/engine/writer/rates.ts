/**
 * Rate limits and provider holds across engines (DESIGN §17), the claims step's part of the
 * limits (limits.ts asks it): one `rate_buckets` row per agent type, shared by every engine of
 * the database, read once per flush under the limits lock and refilled to the transaction's time.
 *
 * - Requests (`per_second`, `per_minute`): a claim takes one token of the type's bucket.
 * - Tokens (`tokens_per_minute`): an attempt is claimed when the window holds its expected tokens
 *   (`expectedTokens`), and takes them; its result gives back what it did not use, or takes what
 *   it used beyond (`charge`), and what it used becomes the type's expectation. An attempt
 *   expecting more than the whole window is let through once the window is full: it would wait
 *   for ever otherwise. Once one attempt of a type finds the window short, the type's later ones
 *   wait too, in their order: a small attempt never overtakes a large one that waits.
 * - Holds: a provider's 429 with Retry-After holds its agent type (any type, limited or not) on
 *   every engine for that long (`hold`); the failed attempt itself retries after it as any retry.
 *
 * Holds are looked up in memory (`HeldTypes`, the engine's), so a type without rate limits is
 * claimed without a read, as before. The memory is what this engine wrote, what it read with a
 * limited type's row (exact: under the limits lock), and the table itself, read at the first
 * claim after the engine starts, after another engine's notice that it wrote a hold, and after
 * notices may have been lost (the listener reconnected).
 */
import type { Attempt } from "../../core/attempt.js";
import { expectedUsage } from "../../core/budget.js";
import { ValidationError } from "../../errors.js";
import type { RateBucket } from "../../store/store.js";
import type { RateLimit } from "../engine-options.js";
import type { FlushContext } from "./context.js";

/** The notice an engine sends when it wrote a hold: others read the holds at their next claim. No agent type has a `!`. */
export const HOLDS_NOTICE = "!holds";

/** The longest hold a Retry-After sets, ms: a longer one is more likely a proxy's mistake than a provider's window. */
export const MAX_HOLD_MS = 3_600_000;

/** The reason of a failure a provider's 429 caused (handler-errors.ts, a worker's `rate_limited`): it may hold its type. */
export const RATE_LIMITED = "rate_limited";

/**
 * The agent types held by a provider's Retry-After, as this engine knows them (see the module
 * doc); shared by its flushes.
 */
export class HeldTypes {
  private readonly until = new Map<string, number>();
  /** The table is to be read at the next claim: at start, and after a notice of a hold elsewhere. */
  stale = true;

  /** When the type's hold ends, or null when it is not held at `now`. */
  heldUntil(agentType: string, now: number): number | null {
    const until = this.until.get(agentType);
    return until !== undefined && until > now ? until : null;
  }

  /** The type's hold as the database has it (null: none). */
  set(agentType: string, until: number | null): void {
    if (until === null) this.until.delete(agentType);
    else this.until.set(agentType, until);
  }

  /** Every hold, as the table has them. */
  replace(holds: ReadonlyMap<string, number>): void {
    this.until.clear();
    for (const [type, until] of holds) this.until.set(type, until);
    this.stale = false;
  }

  /** Types whose hold ended by `now` (forgotten): workers waiting for them may claim again. */
  ended(now: number): string[] {
    const ended = [...this.until].filter(([, until]) => until <= now).map(([type]) => type);
    for (const type of ended) this.until.delete(type);
    return ended;
  }
}

/**
 * The tokens an attempt of a token-limited type is expected to use, as a budget reserves them
 * (core/budget.ts `expectedUsage`): the larger of its payload's `max_tokens` and what the type's
 * last attempt used; with neither known, the whole window, so that it runs alone until an attempt
 * has reported what one takes. At least 1.
 */
export function expectedTokens(payload: unknown, lastUsage: number | null, capacity: number): number {
  const last = lastUsage === null ? undefined : { tokens_in: lastUsage, tokens_out: 0, cost: 0 };
  const expected = expectedUsage(payload, last);
  return expected.probe ? capacity : Math.max(1, Math.ceil(expected.tokens));
}

/** The flush's rate limits: the rows it read (refilled), what it took, and when a type has room again. */
export class Rates {
  /** Limited types' rows, refilled to this flush's time; null until read. */
  private buckets: Map<string, RateBucket> | null = null;
  /** Types whose rows this flush changed: written back before its other writes. */
  private readonly spent = new Set<string>();
  /** Token-limited types an attempt found the window short for: their later attempts wait too. */
  private readonly short = new Set<string>();
  /** Whether this flush held a type (other engines are told with its write). */
  private heldAny = false;
  /**
   * Token-limited types whose window this flush gave tokens back to (an attempt used less than
   * it took): their waiting visits are looked for again, here and by other engines and workers.
   */
  readonly freed = new Set<string>();
  /** When a type this flush found without room has room again (to arm the wake-up timer), or null. */
  nextRoom: number | null = null;

  constructor(private readonly f: FlushContext) {}

  /** How many more attempts of the type its rates and holds let start now (Infinity: no limit, not held). */
  async room(agentType: string): Promise<number> {
    const rate = this.f.o.rateLimits.get(agentType);
    const bucket = rate ? await this.bucket(agentType) : null;
    const held = await this.heldUntil(agentType);
    if (held !== null) {
      this.wakeAt(held);
      return 0;
    }
    if (!rate || !bucket) return Number.POSITIVE_INFINITY;
    let room = Number.POSITIVE_INFINITY;
    if (rate.requests) {
      if (bucket.tokens < 1) {
        this.wakeAt(this.f.now + msUntil(rate.requests, 1 - bucket.tokens));
        return 0;
      }
      room = Math.floor(bucket.tokens);
    }
    if (rate.tokens) {
      if (this.short.has(agentType)) return 0;
      // As many as the window holds of attempts expecting what the last one used, and at least
      // one to look at while any token is left: each attempt's own expectation decides (`admits`).
      const usual = expectedTokens(null, bucket.last_usage, rate.tokens.capacity);
      const left = this.windowLeft(agentType, bucket);
      if (left < 1) {
        this.wakeAt(this.f.now + msUntil(rate.tokens, Math.min(usual, rate.tokens.capacity) - left));
        return 0;
      }
      room = Math.min(room, Math.max(1, Math.floor(left / usual)));
    }
    return room;
  }

  /**
   * Whether the window of a token-limited type holds this attempt's expected tokens (true for a
   * type without a token rate); asked after `room`, right before the claim. When it does not,
   * the type's later attempts in this flush wait too, and the timer is armed for when it will.
   */
  async admits(a: Attempt): Promise<boolean> {
    const rate = this.f.o.rateLimits.get(a.agentType)?.tokens;
    if (!rate) return true;
    if (this.short.has(a.agentType)) return false;
    const bucket = await this.bucket(a.agentType);
    const left = this.windowLeft(a.agentType, bucket);
    // More than the whole window: let through once it is full (the rest of the window waits for its result).
    const need = Math.min(this.expected(a, bucket), rate.capacity);
    if (left >= need) return true;
    this.short.add(a.agentType);
    this.wakeAt(this.f.now + msUntil(rate, need - left));
    return false;
  }

  /**
   * Takes a claim's share (after `room` and `admits`): a request token, and the attempt's
   * expected tokens, which are returned (null for a type without a token rate): its result
   * settles them (`charge`).
   */
  took(a: Attempt): number | null {
    const rate = this.f.o.rateLimits.get(a.agentType);
    const bucket = this.buckets?.get(a.agentType);
    if (!rate || !bucket) return null;
    this.spent.add(a.agentType);
    if (rate.requests) bucket.tokens -= 1;
    if (!rate.tokens) return null;
    const expected = this.expected(a, bucket);
    bucket.usage_tokens = this.windowLeft(a.agentType, bucket) - expected;
    return expected;
  }

  /**
   * An attempt that took `expected` tokens of its type's window at its claim ended having used
   * `used`: the difference is given back (never past the window's size) or taken. `expected`
   * null: the claim was made elsewhere and not told here (a worker's report through another
   * engine), so it is worked out again as the claim did, which is exact unless the type's last
   * usage changed since. `learn`: what it used is the type's next expectation.
   */
  async charge(a: Attempt, expected: number | null, used: number, learn: boolean): Promise<void> {
    const type = a.agentType;
    const rate = this.f.o.rateLimits.get(type)?.tokens;
    if (!rate) return;
    const bucket = await this.bucket(type);
    const took = expected ?? this.expected(a, bucket);
    bucket.usage_tokens = Math.min(rate.capacity, this.windowLeft(type, bucket) + took - used);
    if (learn) bucket.last_usage = used;
    this.spent.add(type);
    if (took > used) this.freed.add(type);
  }

  /**
   * A provider rate-limited an attempt of the type, saying when to come back: no attempt of the
   * type starts on any engine until then (the longest hold wins). Written at once, so this
   * flush's own claims honour it too.
   */
  async hold(agentType: string, retryAfterMs: number): Promise<void> {
    const until = this.f.now + Math.min(retryAfterMs, MAX_HOLD_MS);
    await this.f.tx.holdAgentType(agentType, until);
    const holds = this.f.o.holds;
    holds.set(agentType, Math.max(until, holds.heldUntil(agentType, this.f.now) ?? 0));
    const bucket = this.buckets?.get(agentType);
    if (bucket) bucket.held_until = Math.max(until, bucket.held_until ?? 0);
    this.f.out.holds.push({ agent_type: agentType, until });
    this.heldAny = true;
  }

  /**
   * Limited types with room for an attempt now, and types whose hold has ended, once this flush
   * looked (a sweep: waiting workers may claim them).
   */
  withRoom(): string[] {
    const out = this.f.o.holds.ended(this.f.now);
    for (const [type, bucket] of this.buckets ?? []) {
      const rate = this.f.o.rateLimits.get(type);
      if (!rate || this.short.has(type) || this.f.o.holds.heldUntil(type, this.f.now) !== null) continue;
      if (rate.requests && bucket.tokens < 1) continue;
      if (rate.tokens) {
        const usual = expectedTokens(null, bucket.last_usage, rate.tokens.capacity);
        if (this.windowLeft(type, bucket) < usual) continue;
      }
      if (!out.includes(type)) out.push(type);
    }
    return out;
  }

  /**
   * Arms the wake-up for the types whose visits this engine leaves waiting (`waiting`: its
   * backlog) at when they have room again, as this flush leaves their rows: a claim or a charge
   * after the flush's last look may have emptied a bucket, and nothing else would wake it.
   */
  armWaiting(waiting: ReadonlySet<string>): void {
    const now = this.f.now;
    for (const type of waiting) {
      const held = this.f.o.holds.heldUntil(type, now);
      if (held !== null) this.wakeAt(held);
      const rate = this.f.o.rateLimits.get(type);
      const bucket = this.buckets?.get(type);
      if (!rate || !bucket) continue;
      if (rate.requests && bucket.tokens < 1) this.wakeAt(now + msUntil(rate.requests, 1 - bucket.tokens));
      // A type found short has its wake-up, for the attempt that waits first.
      if (rate.tokens && !this.short.has(type)) {
        const need = Math.min(expectedTokens(null, bucket.last_usage, rate.tokens.capacity), rate.tokens.capacity);
        const left = this.windowLeft(type, bucket);
        if (left < need) this.wakeAt(now + msUntil(rate.tokens, need - left));
      }
    }
  }

  /** Writes back the rows this flush changed; tells other engines of a hold it wrote. */
  async save(): Promise<void> {
    if (this.heldAny && !this.f.o.store.exclusive) this.f.notify.push({ agentType: HOLDS_NOTICE, runIds: [] });
    if (!this.buckets || this.spent.size === 0) return;
    const changed = new Map([...this.buckets].filter(([type]) => this.spent.has(type)));
    await this.f.tx.writeRateBuckets(changed);
  }

  /** The tokens left in a token-limited type's window (its size when never spent). */
  private windowLeft(agentType: string, bucket: RateBucket): number {
    return bucket.usage_tokens ?? this.f.o.rateLimits.get(agentType)?.tokens?.capacity ?? 0;
  }

  private expected(a: Attempt, bucket: RateBucket): number {
    const capacity = this.f.o.rateLimits.get(a.agentType)?.tokens?.capacity ?? 0;
    // A visit's payload is resolved before it is claimed; an item's and a compensation's at dispatch.
    return expectedTokens(a.kind === "visit" ? a.row.payload : null, bucket.last_usage, capacity);
  }

  /** When the type's hold ends (null: not held), reading the holds first when the engine's memory of them is stale. */
  private async heldUntil(agentType: string): Promise<number | null> {
    const holds = this.f.o.holds;
    if (holds.stale) {
      holds.replace(await this.f.tx.rateHolds(this.f.now));
      // The limited types' rows read before are as recent: they stand.
      for (const [type, bucket] of this.buckets ?? []) holds.set(type, bucket.held_until);
    }
    return holds.heldUntil(agentType, this.f.now);
  }

  private wakeAt(at: number): void {
    if (this.nextRoom === null || at < this.nextRoom) this.nextRoom = at;
  }

  /** A limited type's row, refilled to this flush's time; every limited type's is read at the first. */
  private async bucket(agentType: string): Promise<RateBucket> {
    const buckets = this.buckets ?? (await this.read());
    const bucket = buckets.get(agentType);
    if (!bucket) throw new Error(`skein: agent type ${agentType} has no rate limit; this is a Skein bug`);
    return bucket;
  }

  private async read(): Promise<Map<string, RateBucket>> {
    const rates = this.f.o.rateLimits;
    const stored = await this.f.tx.rateBuckets([...rates.keys()]);
    const now = this.f.now;
    const buckets = new Map<string, RateBucket>();
    for (const [type, rate] of rates) {
      const b = stored.get(type);
      // Time never runs backwards for a row (another engine's clock); a row never written is full.
      const elapsed = b ? Math.max(0, now - b.updated_at) : 0;
      const refill = (left: number | null, r: Refill, most: number) =>
        left === null ? most : Math.min(most, left + refilled(r, elapsed));
      buckets.set(type, {
        tokens: rate.requests ? refill(b?.tokens ?? null, rate.requests, rate.requests.burst) : (b?.tokens ?? 0),
        usage_tokens: rate.tokens
          ? refill(b?.usage_tokens ?? null, rate.tokens, rate.tokens.capacity)
          : (b?.usage_tokens ?? null),
        last_usage: b?.last_usage ?? null,
        held_until: b?.held_until ?? null,
        updated_at: now,
      });
      // Read under the limits lock: what the database says of this type's hold is the latest.
      this.f.o.holds.set(type, b?.held_until ?? null);
    }
    this.buckets = buckets;
    return buckets;
  }
}

/** A refill rate: `per` every `everyMs`, kept apart so that whole seconds and minutes refill whole amounts. */
export interface Refill {
  per: number;
  everyMs: number;
}

/** A rate-limited agent type's limits, checked (DESIGN §17). */
export interface TypeRate {
  /** Claims, and the most that gather (`burst`); null without `per_second`/`per_minute`. */
  requests: (Refill & { burst: number }) | null;
  /** Tokens of reported usage (a minute's), and the window's size (`tokens_per_minute`); null without it. */
  tokens: (Refill & { capacity: number }) | null;
}

/** What `elapsed` ms refill at rate `r` (multiplied first: a whole minute gives exactly `tokens_per_minute`). */
export function refilled(r: Refill, elapsed: number): number {
  return (elapsed * r.per) / r.everyMs;
}

/** The whole ms until `missing` more have gathered at rate `r`. */
export function msUntil(r: Refill, missing: number): number {
  return Math.ceil((missing * r.everyMs) / r.per);
}

const RATE_FIELDS = ["per_second", "per_minute", "burst", "tokens_per_minute"];

/**
 * The engine's `rateLimits`, checked: each type's request rate, token rate, or both.
 * @throws ValidationError naming every problem with its path: an unknown field; per_second and
 *   per_minute both given, or no rate at all; a rate that is not a number above 0; a burst that is
 *   not a whole number of 1 or more, or given without a request rate
 */
export function rateLimitsOf(limits: Readonly<Record<string, RateLimit>>): Map<string, TypeRate> {
  const out = new Map<string, TypeRate>();
  const problems: { path: string; message: string }[] = [];
  const positive = (n: unknown) => typeof n === "number" && Number.isFinite(n) && n > 0;
  for (const [type, limit] of Object.entries(limits)) {
    const path = `rateLimits.${type}`;
    if (typeof limit !== "object" || limit === null || Array.isArray(limit)) {
      problems.push({ path, message: "must be an object: { per_second | per_minute, burst, tokens_per_minute }" });
      continue;
    }
    const before = problems.length;
    for (const key of Object.keys(limit)) {
      if (!RATE_FIELDS.includes(key)) {
        problems.push({ path: `${path}.${key}`, message: `is not a rate limit field; use ${RATE_FIELDS.join(", ")}` });
      }
    }
    const { per_second, per_minute, burst, tokens_per_minute } = limit;
    const perRequest = per_second ?? per_minute;
    if (per_second !== undefined && per_minute !== undefined) {
      problems.push({ path, message: "give one of per_second or per_minute, not both" });
    } else if (perRequest === undefined && tokens_per_minute === undefined) {
      problems.push({ path, message: "give per_second or per_minute (requests), tokens_per_minute, or both" });
    } else if (perRequest !== undefined && !positive(perRequest)) {
      const field = per_second === undefined ? "per_minute" : "per_second";
      problems.push({
        path: `${path}.${field}`,
        message: `must be a number above 0, got ${JSON.stringify(perRequest)}`,
      });
    }
    if (burst !== undefined && perRequest === undefined) {
      problems.push({ path: `${path}.burst`, message: "counts requests: give per_second or per_minute with it" });
    } else if (burst !== undefined && !(Number.isInteger(burst) && burst >= 1)) {
      problems.push({
        path: `${path}.burst`,
        message: `must be a whole number, 1 or more, got ${JSON.stringify(burst)}`,
      });
    }
    if (tokens_per_minute !== undefined && !positive(tokens_per_minute)) {
      problems.push({
        path: `${path}.tokens_per_minute`,
        message: `must be a number of tokens above 0, got ${JSON.stringify(tokens_per_minute)}`,
      });
    }
    if (problems.length > before) continue;
    const requests =
      per_second !== undefined
        ? { per: per_second, everyMs: 1000 }
        : per_minute !== undefined
          ? { per: per_minute, everyMs: 60_000 }
          : null;
    out.set(type, {
      requests: requests && { ...requests, burst: burst ?? 1 },
      tokens:
        tokens_per_minute === undefined
          ? null
          : { per: tokens_per_minute, everyMs: 60_000, capacity: tokens_per_minute },
    });
  }
  if (problems.length > 0) throw new ValidationError("rateLimits is invalid", problems);
  return out;
}
