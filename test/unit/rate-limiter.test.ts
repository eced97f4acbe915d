import { describe, expect, it } from 'vitest';
import { MemoryRateLimiter } from '../../src/http/rate-limit/rate-limiter.js';

/**
 * The bucket's arithmetic on a clock the test turns by hand. Six requests a minute: a token
 * comes back every 10 s, and an empty bucket is full again after 60 s. The figures go out as
 * RateLimit-Reset and Retry-After, which are seconds: a reset in milliseconds (60000) would tell
 * a client to wait 16 hours.
 */
describe('MemoryRateLimiter', () => {
  const SETTING = { requests: 6, perSeconds: 60 };
  const clock = () => {
    const at = { ms: Date.parse('2030-01-01T00:00:00Z') };
    return { at, limiter: new MemoryRateLimiter(SETTING, () => at.ms) };
  };

  it('counts down the budget, and says in seconds when the bucket is full again', async () => {
    const { limiter } = clock();
    const decisions = [];
    for (let i = 0; i < 6; i++) decisions.push(await limiter.take('key-a'));
    expect(decisions.map((d) => [d.allowed, d.limit, d.remaining, d.resetSeconds])).toEqual([
      [true, 6, 5, 10],
      [true, 6, 4, 20],
      [true, 6, 3, 30],
      [true, 6, 2, 40],
      [true, 6, 1, 50],
      [true, 6, 0, 60],
    ]);
  });

  it('takes a weighted call whole or not at all, waits for all its tokens, and weighs no call above the bucket', async () => {
    const { at, limiter } = clock();
    expect(await limiter.take('key-a', 4)).toMatchObject({ allowed: true, remaining: 2 });
    // Two tokens left: a call of three is refused, takes none, and hears when three are back (10 s).
    expect(await limiter.take('key-a', 3)).toEqual({ allowed: false, limit: 6, remaining: 2, resetSeconds: 40, retryAfterSeconds: 10 });
    expect(await limiter.take('key-a', 2)).toMatchObject({ allowed: true, remaining: 0 });
    at.ms += 60_000;
    expect(await limiter.take('key-a', 1_000)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('refuses the call past the budget with the seconds until one token is back', async () => {
    const { limiter } = clock();
    for (let i = 0; i < 6; i++) await limiter.take('key-a');
    expect(await limiter.take('key-a')).toEqual({ allowed: false, limit: 6, remaining: 0, resetSeconds: 60, retryAfterSeconds: 10 });
    // A refused call takes nothing: asking again at once answers the same.
    expect(await limiter.take('key-a')).toEqual({ allowed: false, limit: 6, remaining: 0, resetSeconds: 60, retryAfterSeconds: 10 });
    // Another bucket has its own budget.
    expect(await limiter.take('key-b')).toMatchObject({ allowed: true, remaining: 5, resetSeconds: 10 });
  });

  it('refills with time: one token per 10 s, never more than the budget', async () => {
    const { at, limiter } = clock();
    for (let i = 0; i < 6; i++) await limiter.take('key-a');
    at.ms += 9_999;
    expect(await limiter.take('key-a')).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
    at.ms += 1;
    expect(await limiter.take('key-a')).toMatchObject({ allowed: true, remaining: 0, resetSeconds: 60, retryAfterSeconds: 10 });
    at.ms += 25_000;
    // 2.5 tokens back, one taken: 1.5 left, full again in 45 s; a token is already there.
    expect(await limiter.take('key-a')).toEqual({ allowed: true, limit: 6, remaining: 1, resetSeconds: 45, retryAfterSeconds: 1 });
    at.ms += 10 * 60_000;
    expect(await limiter.take('key-a')).toMatchObject({ allowed: true, remaining: 5, resetSeconds: 10 });
  });
});
