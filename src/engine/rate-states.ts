/**
 * Where each agent type stands against its rate limits and holds (DESIGN §17), read from the
 * database outside any transaction: for a page or a command to say why a ready visit waits
 * ("rate-limited until T"), and for the metrics. The claims themselves decide in the flush
 * (writer/rates.ts), by the same rules.
 */
import type { RateBucket, Store } from "../store/store.js";
import { expectedTokens, msUntil, refilled, type TypeRate } from "./writer/rates.js";

/** One agent type's rate limits and hold at a moment. */
export interface RateLimitState {
  agent_type: string;
  /** When its hold (a provider's 429 with Retry-After) ends; null when it is not held. */
  held_until: number | null;
  /** Claims left under `per_second`/`per_minute` (whole or not); null without a request rate. */
  requests_left: number | null;
  /** Its `tokens_per_minute`; null without a token rate. */
  tokens_per_minute: number | null;
  /** Tokens left in its window (below 0 after attempts used more than they expected); null without a token rate. */
  tokens_left: number | null;
  /** What its next attempt is expected to use (more when its payload's max_tokens is larger); null without a token rate. */
  expected_tokens: number | null;
  /**
   * The earliest time an attempt of the type expecting `expected_tokens` may start: the later
   * of its hold's end and when its buckets have room; null when one may start now.
   */
  limited_until: number | null;
}

/**
 * Each agent type with a rate limit in `rates` (this engine's option), and each held one, as
 * the database has them at `now`, by agent type.
 */
export async function rateLimitStates(
  store: Pick<Store, "readRateBuckets">,
  rates: ReadonlyMap<string, TypeRate>,
  now: number,
): Promise<RateLimitState[]> {
  const rows = await store.readRateBuckets();
  const types = new Set(rates.keys());
  for (const [type, row] of rows) if (row.held_until !== null && row.held_until > now) types.add(type);
  return [...types].sort().map((type) => stateOf(type, rows.get(type), rates.get(type), now));
}

function stateOf(agentType: string, row: RateBucket | undefined, rate: TypeRate | undefined, now: number) {
  const elapsed = row ? Math.max(0, now - row.updated_at) : 0;
  const held =
    row?.held_until !== null && row?.held_until !== undefined && row.held_until > now ? row.held_until : null;
  const waits: number[] = held === null ? [] : [held];
  let requestsLeft: number | null = null;
  if (rate?.requests) {
    const { burst } = rate.requests;
    requestsLeft = row ? Math.min(burst, row.tokens + refilled(rate.requests, elapsed)) : burst;
    if (requestsLeft < 1) waits.push(now + msUntil(rate.requests, 1 - requestsLeft));
  }
  let tokensLeft: number | null = null;
  let expected: number | null = null;
  if (rate?.tokens) {
    const { capacity } = rate.tokens;
    const stored = row?.usage_tokens ?? null;
    tokensLeft = stored === null ? capacity : Math.min(capacity, stored + refilled(rate.tokens, elapsed));
    expected = expectedTokens(null, row?.last_usage ?? null, capacity);
    const need = Math.min(expected, capacity);
    if (tokensLeft < need) waits.push(now + msUntil(rate.tokens, need - tokensLeft));
  }
  return {
    agent_type: agentType,
    held_until: held,
    requests_left: requestsLeft,
    tokens_per_minute: rate?.tokens ? rate.tokens.capacity : null,
    tokens_left: tokensLeft,
    expected_tokens: expected,
    limited_until: waits.length === 0 ? null : Math.max(...waits),
  };
}
