import { describe, expect, it } from 'vitest';
import { SKEW_WARNING_MS, skewWarning } from '../../src/storage/clock-skew.js';

describe('clock skew warning', () => {
  it('stays quiet within a second, counting the reading’s own uncertainty', () => {
    expect(skewWarning({ aheadMs: 0, withinMs: 0 })).toBeNull();
    expect(skewWarning({ aheadMs: SKEW_WARNING_MS, withinMs: 0 })).toBeNull();
    expect(skewWarning({ aheadMs: -1_500, withinMs: 600 })).toBeNull();
  });

  it('names the direction and the size', () => {
    expect(skewWarning({ aheadMs: 45_200, withinMs: 1 })).toMatch(/^this machine's clock is 45\.2 s ahead of the database's: .*\(NTP\)$/);
    expect(skewWarning({ aheadMs: -1_200, withinMs: 100 })).toMatch(/^this machine's clock is 1\.2 s behind the database's/);
  });
});
