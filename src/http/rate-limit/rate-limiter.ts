import { sql } from 'kysely';
import type { Db } from '../../storage/database.js';
import type { RateLimitSetting } from '../../config.js';

/**
 * Token buckets, one per API key and one per webhook endpoint (DESIGN §2). A bucket holds at most
 * `requests` tokens and refills at `requests / perSeconds` tokens a second; a call takes one.
 */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** seconds until the bucket is full again */
  resetSeconds: number;
  /** seconds until one token is back (for Retry-After) */
  retryAfterSeconds: number;
}

export interface RateLimiter {
  take(bucket: string): Promise<RateDecision>;
}

function decision(setting: RateLimitSetting, tokens: number, allowed: boolean): RateDecision {
  const perMs = setting.requests / (setting.perSeconds * 1000);
  return {
    allowed,
    limit: setting.requests,
    remaining: Math.max(0, Math.floor(tokens)),
    resetSeconds: Math.ceil((setting.requests - tokens) / perMs / 1000),
    retryAfterSeconds: Math.max(1, Math.ceil((1 - tokens) / perMs / 1000)),
  };
}

/** One process owns the budget (the SQLite deployment). */
export class MemoryRateLimiter implements RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; updatedMs: number }>();
  constructor(
    private readonly setting: RateLimitSetting,
    private readonly nowMs: () => number = Date.now,
  ) {}

  async take(bucket: string): Promise<RateDecision> {
    const now = this.nowMs();
    const perMs = this.setting.requests / (this.setting.perSeconds * 1000);
    const state = this.buckets.get(bucket) ?? { tokens: this.setting.requests, updatedMs: now };
    const refilled = Math.min(this.setting.requests, state.tokens + (now - state.updatedMs) * perMs);
    const allowed = refilled >= 1;
    const tokens = allowed ? refilled - 1 : refilled;
    this.buckets.set(bucket, { tokens, updatedMs: now });
    return decision(this.setting, tokens, allowed);
  }
}

/**
 * Every process shares one budget through a row per bucket. One statement refills and takes a
 * token atomically; a denied call leaves the row as it was (refilling later from the old time
 * gives the same tokens), so "no row returned" means denied. Time comes from the database clock,
 * so processes on machines with skewed clocks agree.
 */
export class PostgresRateLimiter implements RateLimiter {
  constructor(
    private readonly db: Db,
    private readonly setting: RateLimitSetting,
  ) {}

  async take(bucket: string): Promise<RateDecision> {
    const capacity = this.setting.requests;
    const perMs = capacity / (this.setting.perSeconds * 1000);
    const now = sql`(extract(epoch from clock_timestamp()) * 1000)::bigint`;
    const refilled = sql`least(${capacity}::double precision, b.tokens + (${now} - b.updated_ms) * ${perMs}::double precision)`;
    const taken = await sql<{ tokens: number }>`
      insert into rate_limit_buckets as b (key, tokens, updated_ms)
      values (${bucket}, ${capacity - 1}::double precision, ${now})
      on conflict (key) do update set tokens = ${refilled} - 1, updated_ms = ${now}
      where ${refilled} >= 1
      returning tokens`.execute(this.db);
    if (taken.rows.length > 0) return decision(this.setting, Number(taken.rows[0].tokens), true);
    const current = await sql<{ tokens: number }>`
      select ${refilled} as tokens from rate_limit_buckets b where b.key = ${bucket}`.execute(this.db);
    return decision(this.setting, Number(current.rows[0]?.tokens ?? 0), false);
  }
}
