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
    const refilled = Math.min(this.setting.requests, state.tokens + Math.max(0, now - state.updatedMs) * perMs);
    const allowed = refilled >= 1;
    const tokens = allowed ? refilled - 1 : refilled;
    this.buckets.set(bucket, { tokens, updatedMs: now });
    return decision(this.setting, tokens, allowed);
  }
}

/**
 * Every process shares one budget through a row per bucket in PostgreSQL. A process does not
 * ask the database for every call: it leases a small chunk of tokens (a twentieth of the
 * capacity) in one atomic statement and spends them locally for at most one second. The shared
 * budget is never exceeded (a token is spent once, wherever it was leased); at worst a lease
 * that expires unused makes the limit slightly stricter. Time comes from the database clock,
 * so processes on machines with skewed clocks agree.
 */
export class PostgresRateLimiter implements RateLimiter {
  private readonly leases = new Map<string, { tokens: number; expiresMs: number; shared: number }>();
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly chunk: number;
  private readonly leaseMs: number;

  constructor(
    private readonly db: Db,
    private readonly setting: RateLimitSetting,
    private readonly nowMs: () => number = Date.now,
  ) {
    this.chunk = Math.max(1, Math.floor(setting.requests / 20));
    this.leaseMs = Math.min(1000, setting.perSeconds * 1000);
  }

  async take(bucket: string): Promise<RateDecision> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const lease = this.leases.get(bucket);
      if (lease && lease.tokens >= 1 && this.nowMs() < lease.expiresMs) {
        lease.tokens -= 1;
        return decision(this.setting, lease.tokens + lease.shared, true);
      }
      if (lease && lease.tokens < 1 && this.nowMs() < lease.expiresMs && lease.shared < 1 && attempt > 0) {
        return decision(this.setting, lease.shared, false);
      }
      // One lease request per bucket at a time; concurrent callers wait for it and try again.
      let pending = this.inFlight.get(bucket);
      if (!pending) {
        pending = this.renew(bucket).finally(() => this.inFlight.delete(bucket));
        this.inFlight.set(bucket, pending);
      }
      await pending;
    }
    const lease = this.leases.get(bucket);
    return decision(this.setting, lease?.shared ?? 0, false);
  }

  private async renew(bucket: string): Promise<void> {
    const capacity = this.setting.requests;
    const perMs = capacity / (this.setting.perSeconds * 1000);
    const now = sql`(extract(epoch from clock_timestamp()) * 1000)::bigint`;
    const refilled = sql`least(${capacity}::double precision, b.tokens + (${now} - b.updated_ms) * ${perMs}::double precision)`;
    const grant = sql`least(${this.chunk}::double precision, floor(${refilled}))`;
    const result = await sql<{ tokens: number; last_grant: number }>`
      insert into rate_limit_buckets as b (key, tokens, updated_ms, last_grant)
      values (${bucket}, ${capacity - Math.min(this.chunk, capacity)}::double precision, ${now}, ${Math.min(this.chunk, capacity)})
      on conflict (key) do update set
        last_grant = ${grant}::integer,
        tokens = ${refilled} - ${grant},
        updated_ms = ${now}
      returning tokens, last_grant`.execute(this.db);
    const row = result.rows[0];
    this.leases.set(bucket, {
      tokens: Number(row.last_grant),
      shared: Number(row.tokens),
      expiresMs: this.nowMs() + this.leaseMs,
    });
  }
}
