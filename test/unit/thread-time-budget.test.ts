import { describe, expect, it } from 'vitest';
import { ThreadTimeBudget } from '../../src/lib/thread-time-budget.js';
import { ApiError } from '../../src/lib/errors.js';

/** A clock the work itself moves: each piece of work "takes" the milliseconds it is given. */
function budgetWithClock(budgetMs: number, windowMs: number) {
  let now = 0;
  const budget = new ThreadTimeBudget(budgetMs, windowMs, 'checking conditions', () => now);
  return {
    budget,
    work: (ms: number) => () => {
      now += ms;
      return 'done';
    },
    wait: (ms: number) => {
      now += ms;
    },
  };
}

describe('ThreadTimeBudget', () => {
  it('lets cheap work through without end, and refuses a caller that spent its share with 429 and Retry-After', () => {
    const { budget, work, wait } = budgetWithClock(1_000, 10_000);
    for (let i = 0; i < 1_000; i++) expect(budget.spend('cheap', work(0.05))).toBe('done');
    expect(budget.spend('costly', work(800))).toBe('done');
    // 800 ms used: one more is let in, and may overrun the budget...
    expect(budget.spend('costly', work(800))).toBe('done');
    // ...then nothing until enough has come back (600 ms over: 6 s of the window).
    let refused: unknown;
    try {
      budget.spend('costly', work(800));
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).code).toBe('rate_limited');
    expect((refused as ApiError).headers['Retry-After']).toBe('6');
    expect((refused as ApiError).message).toMatch(/^this key has used its share of the service's time for checking conditions \(1000 ms in 10 s\)/);
    // Another key is not held back by it.
    expect(budget.spend('other', work(10))).toBe('done');
    wait(6_000);
    expect(budget.spend('costly', work(1))).toBe('done');
  });

  it('charges work that throws too', () => {
    const { budget, work } = budgetWithClock(100, 1_000);
    expect(() =>
      budget.spend('thrower', () => {
        work(150)();
        throw new Error('refused');
      }),
    ).toThrow('refused');
    expect(() => budget.spend('thrower', work(1))).toThrow(/used its share/);
  });
});
