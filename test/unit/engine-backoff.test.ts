import { describe, expect, it } from 'vitest';
import { backoffDelay, isRetryableStatus, retryAfterMs } from '../../src/engine/outbound/backoff.js';
import { afterDuration, nextLocalTime, TimerSettingError } from '../../src/engine/timers.js';

describe('backoff', () => {
  const policy = { attempts: 5, baseMs: 100, maxMs: 1_000 };

  it('doubles the ceiling each retry, up to the cap', () => {
    expect([1, 2, 3, 4, 5, 6].map((retry) => backoffDelay(retry, policy, () => 0.999999))).toEqual([99, 199, 399, 799, 999, 999]);
  });

  it('draws the delay uniformly below the ceiling (full jitter)', () => {
    expect(backoffDelay(3, policy, () => 0)).toBe(0);
    expect(backoffDelay(3, policy, () => 0.5)).toBe(200);
    for (let i = 0; i < 100; i++) {
      const delay = backoffDelay(2, policy);
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(delay).toBeLessThan(200);
    }
  });

  it('retries 5xx and 429 only', () => {
    expect([500, 502, 503, 429].every(isRetryableStatus)).toBe(true);
    expect([200, 301, 400, 404, 409, 422].some(isRetryableStatus)).toBe(false);
  });

  it('reads Retry-After in seconds or as a date', () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    expect(retryAfterMs('2', now)).toBe(2000);
    expect(retryAfterMs('Tue, 01 Jan 2030 00:00:03 GMT', now)).toBe(3000);
    expect(retryAfterMs(undefined, now)).toBeNull();
    expect(retryAfterMs('soon', now)).toBeNull();
  });
});

describe('wait timers', () => {
  it('adds a duration, calendar-aware', () => {
    expect(afterDuration(new Date('2030-01-31T10:00:00Z'), 'P2D')).toBe('2030-02-02T10:00:00.000Z');
    expect(afterDuration(new Date('2030-01-31T10:00:00Z'), 'P1M')).toBe('2030-02-28T10:00:00.000Z');
    expect(afterDuration(new Date('2030-01-01T00:00:00Z'), 'PT90S')).toBe('2030-01-01T00:01:30.000Z');
    expect(() => afterDuration(new Date(), 'soon')).toThrow(TimerSettingError);
    // ISO 8601 has no negative parts; luxon reads them, and this one ended a wait 23 h before it began.
    expect(() => afterDuration(new Date(), 'P-1M30DT1H')).toThrow(/no part may be negative/);
    expect(() => afterDuration(new Date(), 'P0.00000001D')).toThrow(TimerSettingError);
    // Past the year 9999 a deadline is the last instant written with four digits: `+010026-…`
    // sorts before every stored time, and such a wait ended at once.
    expect(afterDuration(new Date('2026-11-27T04:52:34.140Z'), 'P7972Y')).toBe('9998-11-27T04:52:34.140Z');
    expect(afterDuration(new Date('2026-11-27T04:52:34.140Z'), 'P8000Y')).toBe('9999-12-31T23:59:59.999Z');
    expect(afterDuration(new Date('2026-11-27T04:52:34.140Z'), 'P999999999Y')).toBe('9999-12-31T23:59:59.999Z');
  });

  it('finds the next local time, today or tomorrow', () => {
    // 07:00 in Paris (UTC+1 in January) is 06:00Z.
    expect(nextLocalTime(new Date('2030-01-10T05:00:00Z'), '07:00', 'Europe/Paris')).toBe('2030-01-10T06:00:00.000Z');
    expect(nextLocalTime(new Date('2030-01-10T06:00:00Z'), '07:00', 'Europe/Paris')).toBe('2030-01-11T06:00:00.000Z');
    expect(nextLocalTime(new Date('2030-01-10T07:00:00Z'), '07:00:30', 'Europe/Paris')).toBe('2030-01-11T06:00:30.000Z');
  });

  it('keeps the wall time across a DST change', () => {
    // Paris moves to UTC+2 on 2030-03-31: 09:00 local is 08:00Z the day before and 07:00Z after.
    expect(nextLocalTime(new Date('2030-03-30T12:00:00Z'), '09:00', 'Europe/Paris')).toBe('2030-03-31T07:00:00.000Z');
  });

  it('moves a local time that does not exist (spring forward) on by the gap', () => {
    // New York skips 02:00–03:00 on 2027-03-14 (07:00Z): 02:30 is taken as 03:30 EDT.
    expect(nextLocalTime(new Date('2027-03-14T05:00:00Z'), '02:30', 'America/New_York')).toBe('2027-03-14T07:30:00.000Z');
  });

  it('takes a local time that happens twice (fall back) at whichever occurrence comes next', () => {
    // New York falls back at 2027-11-07T06:00Z: 01:00–02:00 EDT (05:00–06:00Z), then 01:00–02:00 EST (06:00–07:00Z).
    const next = (now: string, until: string) => nextLocalTime(new Date(now), until, 'America/New_York');
    expect(next('2027-11-07T05:15:00Z', '01:30')).toBe('2027-11-07T05:30:00.000Z');
    expect(next('2027-11-07T05:45:00Z', '01:30')).toBe('2027-11-07T06:30:00.000Z');
    expect(next('2027-11-07T05:57:45Z', '01:00')).toBe('2027-11-07T06:00:00.000Z');
    expect(next('2027-11-07T06:15:00Z', '01:30')).toBe('2027-11-07T06:30:00.000Z');
    expect(next('2027-11-07T06:45:00Z', '01:30')).toBe('2027-11-08T06:30:00.000Z');
    expect(next('2027-11-07T06:45:00Z', '03:00')).toBe('2027-11-07T08:00:00.000Z');
    // Paris falls back at 2030-10-27T01:00Z: 02:30 CEST is 00:30Z, 02:30 CET 01:30Z.
    expect(nextLocalTime(new Date('2030-10-27T00:45:00Z'), '02:30', 'Europe/Paris')).toBe('2030-10-27T01:30:00.000Z');
  });
});
