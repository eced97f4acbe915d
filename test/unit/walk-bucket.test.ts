import { describe, expect, it } from 'vitest';
import { walkBucket } from '../../src/modules/search/walk-in-store.js';

describe('walk buckets (PostgreSQL page statements)', () => {
  it('reads exactly the common first pages, and at least offset + limit otherwise', () => {
    for (const limit of [10, 20, 50, 100, 200, 500]) expect(walkBucket(0, limit)).toBe(limit);
    expect(walkBucket(0, 1)).toBe(10);
    expect(walkBucket(50, 50)).toBe(100);
    expect(walkBucket(100, 50)).toBe(200);
    expect(walkBucket(4_999, 2)).toBe(10_000);
    expect(walkBucket(100_000, 500)).toBe(100_500);
    for (let needed = 1; needed <= 100_500; needed += 997) expect(walkBucket(needed - 1, 1)).toBeGreaterThanOrEqual(needed);
  });

  it('refuses a walk beyond the search bounds (offset 100,000, limit 500)', () => {
    expect(() => walkBucket(100_000, 501)).toThrow(/beyond the search bounds/);
  });
});
