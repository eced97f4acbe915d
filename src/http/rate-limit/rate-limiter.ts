import { sql } from 'kysely';
import type { Db } from '../../storage/database.js';
import type { RateLimitSetting } from '../../config.js';

/**
 * Token buckets, one per API key and one per webhook endpoint (DESIGN §2). A bucket holds at most
 * `requests` tokens and refills at `requests / perSeconds` tokens a second; a call takes one, or
 * `cost` tokens when it weighs more (a large body: plugins/authenticate.ts), at most a full
 * bucket.
 */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** seconds until the bucket is full again */
  resetSeconds: number;
  /** seconds until the call's tokens are back (for Retry-After) */
  retryAfterSeconds: number;
}

export interface RateLimiter {
  take(bucket: string, cost?: number): Promise<RateDecision>;
}

function decision(setting: RateLimitSetting, tokens: number, allowed: boolean, cost = 1): RateDecision {
  const perMs = setting.requests / (setting.perSeconds * 1000);
  return {
    allowed,
    limit: setting.requests,
    remaining: Math.max(0, Math.floor(tokens)),
    resetSeconds: Math.ceil((setting.requests - tokens) / perMs / 1000),
    retryAfterSeconds: Math.max(1, Math.ceil((cost - tokens) / perMs / 1000)),
  };
}

/** A call's tokens: a whole number from 1 to the bucket's size (a call that costs more could never pass). */
function tokensFor(setting: RateLimitSetting, cost: number): number {
  return Math.min(setting.requests, Math.max(1, Math.floor(cost)));
}

/** One process owns the budget (the SQLite deployment). */
export class MemoryRateLimiter implements RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; updatedMs: number }>();
  constructor(
    private readonly setting: RateLimitSetting,
    private readonly nowMs: () => number = Date.now,
  ) {}

  async take(bucket: string, cost = 1): Promise<RateDecision> {
    const needed = tokensFor(this.setting, cost);
    const now = this.nowMs();
    const perMs = this.setting.requests / (this.setting.perSeconds * 1000);
    const state = this.buckets.get(bucket) ?? { tokens: this.setting.requests, updatedMs: now };
    const refilled = Math.min(this.setting.requests, state.tokens + Math.max(0, now - state.updatedMs) * perMs);
    const allowed = refilled >= needed;
    const tokens = allowed ? refilled - needed : refilled;
    this.buckets.set(bucket, { tokens, updatedMs: now });
    return decision(this.setting, tokens, allowed, needed);
  }
}

/**
 * Every process shares one budget through a row per bucket in PostgreSQL. A process does not
 * ask the database for every call: it leases a small chunk of tokens (a twentieth of the
 * capacity, or as many as callers are waiting for, if more) in one atomic statement and spends
 * them locally for at most one second. The shared budget is never exceeded (a token is spent
 * once, wherever it was leased). The tokens a lease did not spend go back to the shared row
 * with this process's next lease of the bucket, or at once when a call is refused
 * (`giveBack`): until 2026-11-28 they were dropped, and a caller of a
 * `1000/3600s` budget calling every second or so spent a chunk of 50 per call (21 calls spent
 * the hour's budget: a review). Time comes from the database clock, so processes on machines
 * with skewed clocks agree.
 */
export class PostgresRateLimiter implements RateLimiter {
  private readonly leases = new Map<string, Lease>();
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Callers of each bucket waiting for a lease: a renewal asks for at least that many tokens. */
  private readonly waiting = new Map<string, number>();
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

  /**
   * A token from the process's lease, else from a new lease. A caller is refused only when a
   * lease asked for after it came found the shared budget spent (nothing granted): a burst of
   * concurrent calls within the budget is never refused for the lease's chunk size. Until
   * 2026-11-26 a caller gave up after three renewals of a chunk each, and 30 concurrent fires
   * through two processes, with 40 tokens in the budget, drew 13 refusals.
   */
  async take(bucket: string, cost = 1): Promise<RateDecision> {
    const needed = tokensFor(this.setting, cost);
    for (let renewals = 0; ; renewals++) {
      const lease = this.leases.get(bucket);
      const live = lease !== undefined && this.nowMs() < lease.expiresMs;
      if (live && lease.tokens >= needed) {
        lease.tokens -= needed;
        return decision(this.setting, lease.tokens + lease.shared, true, needed);
      }
      // Refused when the store was asked for this call's tokens and had fewer. A caller that
      // joined a renewal asked for before it came (sized for lighter calls) asks again: a 7-token
      // call was refused with 98 tokens in the budget because a 5-token renewal was in flight.
      const askedEnough = live && lease.wanted >= needed;
      if (renewals > 0 && live && lease.granted < needed && (askedEnough || renewals >= MAX_RENEWALS)) {
        const left = lease.tokens + lease.shared;
        await this.giveBack(bucket, lease);
        return decision(this.setting, left, false, needed);
      }
      await this.renewal(bucket, needed);
    }
  }

  /** One lease request per bucket at a time; callers that come meanwhile wait for it and look again. */
  private async renewal(bucket: string, needed: number): Promise<void> {
    this.waiting.set(bucket, (this.waiting.get(bucket) ?? 0) + needed);
    try {
      let pending = this.inFlight.get(bucket);
      if (!pending) {
        const wanted = Math.min(this.setting.requests, Math.max(this.chunk, this.waiting.get(bucket) ?? 1));
        pending = this.renew(bucket, wanted).finally(() => this.inFlight.delete(bucket));
        this.inFlight.set(bucket, pending);
      }
      await pending;
    } finally {
      const left = (this.waiting.get(bucket) ?? needed) - needed;
      if (left > 0) this.waiting.set(bucket, left);
      else this.waiting.delete(bucket);
    }
  }

  /**
   * A refused call leaves the lease's tokens (too few for it) to the shared row at once, unless
   * other calls of this process wait for the bucket (they will spend them): kept in the lease,
   * they went back only with this process's next lease of the bucket, and a process that got no
   * more calls of it kept them from every other (a 30-token call refused with 20 granted left
   * another process refused with 20 tokens unspent: a review). The give-back takes the bucket's
   * renewal slot, so a lease asked for meanwhile sees the tokens it returns (run side by side on
   * two connections, a lighter call's renewal found the row empty and was refused: a
   * verification round).
   */
  private async giveBack(bucket: string, lease: Lease): Promise<void> {
    const othersWaiting = (this.waiting.get(bucket) ?? 0) > 0;
    const tokens = lease.tokens;
    if (tokens <= 0 || othersWaiting) return;
    // The lease ends here: a call that comes meanwhile asks the store for itself (the lease's
    // `wanted` was the refused call's, and refused a lighter call that found it still live).
    lease.tokens = 0;
    lease.expiresMs = 0;
    const before = this.inFlight.get(bucket) ?? Promise.resolve();
    const giving: Promise<void> = before
      .catch(() => undefined)
      .then(async () => {
        await sql`
          update rate_limit_buckets set tokens = least(${this.setting.requests}::double precision, tokens + ${tokens}::double precision)
          where key = ${bucket}`.execute(this.db);
      })
      // Giving back is a courtesy: failed, the tokens are lost (stricter, never more), and
      // neither the refused call (a 429) nor those queued behind it get the store's error.
      .catch(() => undefined)
      .finally(() => {
        if (this.inFlight.get(bucket) === giving) this.inFlight.delete(bucket);
      });
    this.inFlight.set(bucket, giving);
    await giving;
  }

  private async renew(bucket: string, wanted: number): Promise<void> {
    const capacity = this.setting.requests;
    const perMs = capacity / (this.setting.perSeconds * 1000);
    // The old lease's tokens go back as the new one is taken (taken here, before the first
    // await, so no caller spends them meanwhile). Lost if the statement fails: stricter, never more.
    const old = this.leases.get(bucket);
    const unspent = old ? old.tokens : 0;
    if (old) old.tokens = 0;
    const now = sql`(extract(epoch from clock_timestamp()) * 1000)::bigint`;
    const refilled = sql`least(${capacity}::double precision, b.tokens + ${unspent}::double precision + (${now} - b.updated_ms) * ${perMs}::double precision)`;
    const grant = sql`least(${wanted}::double precision, floor(${refilled}))`;
    const result = await sql<{ tokens: number; last_grant: number }>`
      insert into rate_limit_buckets as b (key, tokens, updated_ms, last_grant)
      values (${bucket}, ${capacity - wanted}::double precision, ${now}, ${wanted})
      on conflict (key) do update set
        last_grant = ${grant}::integer,
        tokens = ${refilled} - ${grant},
        updated_ms = ${now}
      returning tokens, last_grant`.execute(this.db);
    const row = result.rows[0];
    this.leases.set(bucket, {
      tokens: Number(row.last_grant),
      granted: Number(row.last_grant),
      wanted,
      shared: Number(row.tokens),
      expiresMs: this.nowMs() + this.leaseMs,
    });
  }
}

/** Tokens a process holds of a shared bucket, for at most a second. */
interface Lease {
  /** left to spend */
  tokens: number;
  /** what the store gave, and what it was asked for */
  granted: number;
  wanted: number;
  /** the shared row's tokens after the grant: with `tokens`, what RateLimit-Remaining says */
  shared: number;
  expiresMs: number;
}

/** Renewals one call may wait for before it is refused, when others' renewals keep coming first. */
const MAX_RENEWALS = 3;
