import { DateTime } from 'luxon';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../../src/lib/errors.js';
import { latestTickAtOrBefore, nextTickAfter } from '../../src/modules/schedules/next-tick.js';
import { parseSchedule, type Schedule } from '../../src/modules/schedules/schedule.js';

const AMSTERDAM = 'Europe/Amsterdam';
const NEW_YORK = 'America/New_York';

function schedule(interval: string, timezone = 'UTC', startAt?: string): Schedule {
  return startAt === undefined ? { interval, timezone } : { interval, timezone, startAt };
}

const at = (iso: string): Date => new Date(iso);

/** The first `count` ticks after `after`, as ISO UTC strings. */
function ticks(s: Schedule, anchor: string, after: string, count: number): string[] {
  const out: string[] = [];
  let cursor = at(after);
  for (let i = 0; i < count; i++) {
    cursor = nextTickAfter(s, at(anchor), cursor);
    out.push(cursor.toISOString());
  }
  return out;
}

/** Ticks shown as wall time with offset in the zone, which is what the DST rules talk about. */
function localTicks(s: Schedule, anchor: string, after: string, count: number): string[] {
  return ticks(s, anchor, after, count).map((iso) =>
    DateTime.fromISO(iso, { zone: s.timezone }).toFormat("yyyy-MM-dd'T'HH:mmZZ"),
  );
}

function rejection(input: unknown): ApiError {
  try {
    parseSchedule(input);
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    const apiError = error as ApiError;
    expect(apiError.code).toBe('invalid_request');
    expect(apiError.status).toBe(400);
    return apiError;
  }
  throw new Error(`expected ${JSON.stringify(input)} to be rejected`);
}

const valid = { interval: 'PT15M', timezone: 'UTC' };

describe('parseSchedule', () => {
  it('accepts interval and timezone and returns a fresh object', () => {
    const input = { ...valid };
    const parsed = parseSchedule(input);
    expect(parsed).toEqual({ interval: 'PT15M', timezone: 'UTC' });
    expect(parsed).not.toBe(input);
    expect('startAt' in parsed).toBe(false);
  });

  it('stores startAt as ISO 8601 UTC with milliseconds', () => {
    expect(parseSchedule({ ...valid, startAt: '2026-03-01T08:00:00+01:00' }).startAt).toBe('2026-03-01T07:00:00.000Z');
    expect(parseSchedule({ ...valid, startAt: '2026-03-01T08:00Z' }).startAt).toBe('2026-03-01T08:00:00.000Z');
    expect(parseSchedule({ ...valid, startAt: '2026-03-01T08:00:00.123-05:00' }).startAt).toBe('2026-03-01T13:00:00.123Z');
  });

  it('treats a null startAt as none, so PATCH can clear it', () => {
    expect(parseSchedule({ ...valid, startAt: null })).toEqual(valid);
  });

  it.each(['PT1M', 'PT15M', 'PT1H', 'PT1H30M', 'PT90S', 'PT24H', 'P1D', 'P1DT12H', 'P1W', 'P2W3D', 'P1M', 'P3M', 'P1Y', 'P1Y2M3DT4H5M6S', 'P0DT1H'])(
    'accepts the duration %s',
    (interval) => {
      expect(parseSchedule({ ...valid, interval }).interval).toBe(interval);
    },
  );

  it.each(['0 8 * * *', '*/15 * * * *', '0 9 * * MON-FRI', '30 6 1 * *', '0 0 L * *', '0 12 * JAN,JUL 1'])(
    'accepts the cron expression %s',
    (interval) => {
      expect(parseSchedule({ ...valid, interval }).interval).toBe(interval);
    },
  );

  it.each(['UTC', AMSTERDAM, NEW_YORK, 'Asia/Kolkata', 'Etc/GMT+1'])('accepts the zone %s', (timezone) => {
    expect(parseSchedule({ ...valid, timezone }).timezone).toBe(timezone);
  });

  describe('rejects', () => {
    it.each([null, 'PT15M', 42, [valid]])('a schedule that is not an object: %j', (input) => {
      expect(rejection(input).message).toMatch(/^body\.schedule must be an object/);
    });

    it('an unknown field, naming it', () => {
      expect(rejection({ ...valid, every: 'day' }).message).toBe('body.schedule.every is not a known field');
    });

    it('a missing or non-string interval', () => {
      expect(rejection({ timezone: 'UTC' }).message).toBe('body.schedule.interval is required');
      expect(rejection({ timezone: 'UTC', interval: 900 }).message).toMatch(/^body\.schedule\.interval must be a non-empty string/);
      expect(rejection({ timezone: 'UTC', interval: '' }).message).toMatch(/^body\.schedule\.interval must be a non-empty string/);
    });

    it.each([
      ['PT30S', /at least PT1M/],
      ['PT59S', /at least PT1M/],
      ['P0D', /must not be zero/],
      ['PT0M', /must not be zero/],
      ['P1000Y', /at most P100Y/],
      ['-PT15M', /ISO 8601 duration/],
      ['P-1D', /ISO 8601 duration/],
      ['PT0.5H', /ISO 8601 duration/],
      ['PT1,5H', /ISO 8601 duration/],
      ['P', /ISO 8601 duration/],
      ['P1DT', /ISO 8601 duration/],
      ['PT', /ISO 8601 duration/],
      ['P1H', /ISO 8601 duration/],
      ['pt15m', /5-field cron/],
      ['15 minutes', /5-field cron/],
    ])('the interval %s', (interval, message) => {
      const error = rejection({ ...valid, interval });
      expect(error.message).toMatch(/^body\.schedule\.interval /);
      expect(error.message).toMatch(message);
    });

    it.each([
      ['0 0 8 * * *', /exactly 5 fields.*seconds field is not supported/],
      ['* * * *', /exactly 5 fields/],
      ['@daily', /5-field cron expression$/],
      ['61 * * * *', /not a valid cron expression/],
      ['0 25 * * *', /not a valid cron expression/],
      ['0 8 * * FUNDAY', /not a valid cron expression/],
      ['0 8 * * ?', /must not use "\?"/],
      ['0 0 30 2 *', /never fires/],
    ])('the cron expression %s', (interval, message) => {
      const error = rejection({ ...valid, interval });
      expect(error.message).toMatch(/^body\.schedule\.interval /);
      expect(error.message).toMatch(message);
    });

    it('a missing timezone', () => {
      expect(rejection({ interval: 'PT15M' }).message).toBe('body.schedule.timezone is required');
    });

    it.each(['Mars/Olympus_Mons', '+01:00', '-05:00', 'UTC+1', 'Europe/Amsterdam ', 'CEST'])('the zone %j', (timezone) => {
      expect(rejection({ ...valid, timezone }).message).toMatch(/^body\.schedule\.timezone must be an IANA time zone name/);
    });

    it.each([
      '2026-03-01T08:00:00',
      '2026-03-01',
      '2026-03-01 08:00:00Z',
      '2026-02-30T08:00:00Z',
      '2026-03-01T25:00:00Z',
      'tomorrow',
      1_772_000_000_000,
    ])('the startAt %j', (startAt) => {
      expect(rejection({ ...valid, startAt }).message).toMatch(/^body\.schedule\.startAt must be an ISO 8601 date-time with an offset/);
    });
  });
});

describe('nextTickAfter: elapsed-time durations', () => {
  const anchor = '2026-01-01T00:00:00.000Z';

  it('steps PT15M from the anchor', () => {
    expect(ticks(schedule('PT15M'), anchor, '2026-01-01T00:07:00.000Z', 3)).toEqual([
      '2026-01-01T00:15:00.000Z',
      '2026-01-01T00:30:00.000Z',
      '2026-01-01T00:45:00.000Z',
    ]);
  });

  it('answers strictly after: a time on a tick gets the next one', () => {
    expect(nextTickAfter(schedule('PT15M'), at(anchor), at('2026-01-01T00:15:00.000Z')).toISOString()).toBe('2026-01-01T00:30:00.000Z');
    expect(nextTickAfter(schedule('PT15M'), at(anchor), at(anchor)).toISOString()).toBe('2026-01-01T00:15:00.000Z');
    expect(nextTickAfter(schedule('PT15M'), at(anchor), at('2026-01-01T00:14:59.999Z')).toISOString()).toBe('2026-01-01T00:15:00.000Z');
  });

  it('keeps the anchor off the hour (PT1H30M from 10:07:30.250)', () => {
    expect(ticks(schedule('PT1H30M'), '2026-01-01T10:07:30.250Z', '2026-01-01T10:07:30.250Z', 2)).toEqual([
      '2026-01-01T11:37:30.250Z',
      '2026-01-01T13:07:30.250Z',
    ]);
  });

  it('starts at the anchor when asked about an earlier time', () => {
    expect(nextTickAfter(schedule('PT15M'), at(anchor), at('2025-12-31T12:00:00.000Z')).toISOString()).toBe(anchor);
  });

  it('ignores DST: PT1H in Amsterdam is one real hour across the spring-forward night', () => {
    const s = schedule('PT1H', AMSTERDAM);
    expect(ticks(s, '2026-03-28T23:00:00.000Z', '2026-03-28T23:00:00.000Z', 3)).toEqual([
      '2026-03-29T00:00:00.000Z',
      '2026-03-29T01:00:00.000Z',
      '2026-03-29T02:00:00.000Z',
    ]);
    // Wall clock reads 01:00, 03:00, 04:00: the skipped hour is simply not on the clock.
    expect(localTicks(s, '2026-03-28T23:00:00.000Z', '2026-03-28T23:00:00.000Z', 3)).toEqual([
      '2026-03-29T01:00+01:00',
      '2026-03-29T03:00+02:00',
      '2026-03-29T04:00+02:00',
    ]);
  });

  it('ignores DST: PT1H in New York passes 01:00 twice on the fall-back night', () => {
    const s = schedule('PT1H', NEW_YORK);
    expect(localTicks(s, '2026-11-01T04:00:00.000Z', '2026-11-01T04:00:00.000Z', 3)).toEqual([
      '2026-11-01T01:00-04:00',
      '2026-11-01T01:00-05:00',
      '2026-11-01T02:00-05:00',
    ]);
  });

  it('treats PT24H as 24 real hours, unlike P1D', () => {
    const anchor8 = '2026-03-28T07:00:00.000Z'; // 08:00 in Amsterdam, the day before spring forward
    expect(localTicks(schedule('PT24H', AMSTERDAM), anchor8, anchor8, 1)).toEqual(['2026-03-29T09:00+02:00']);
    expect(localTicks(schedule('P1D', AMSTERDAM), anchor8, anchor8, 1)).toEqual(['2026-03-29T08:00+02:00']);
  });
});

describe('nextTickAfter: calendar durations across DST', () => {
  it('P1D in Amsterdam stays at 08:00 across spring forward (2026-03-29)', () => {
    const anchor = '2026-03-27T07:00:00.000Z'; // 08:00+01:00
    const s = schedule('P1D', AMSTERDAM);
    expect(ticks(s, anchor, anchor, 3)).toEqual([
      '2026-03-28T07:00:00.000Z',
      '2026-03-29T06:00:00.000Z',
      '2026-03-30T06:00:00.000Z',
    ]);
    expect(localTicks(s, anchor, anchor, 3)).toEqual(['2026-03-28T08:00+01:00', '2026-03-29T08:00+02:00', '2026-03-30T08:00+02:00']);
  });

  it('P1D in Amsterdam stays at 08:00 across fall back (2026-10-25)', () => {
    const anchor = '2026-10-23T06:00:00.000Z'; // 08:00+02:00
    const s = schedule('P1D', AMSTERDAM);
    expect(ticks(s, anchor, anchor, 3)).toEqual([
      '2026-10-24T06:00:00.000Z',
      '2026-10-25T07:00:00.000Z',
      '2026-10-26T07:00:00.000Z',
    ]);
  });

  it('P1D in New York stays at 08:00 across spring forward (2026-03-08)', () => {
    const anchor = '2026-03-06T13:00:00.000Z'; // 08:00-05:00
    expect(ticks(schedule('P1D', NEW_YORK), anchor, anchor, 3)).toEqual([
      '2026-03-07T13:00:00.000Z',
      '2026-03-08T12:00:00.000Z',
      '2026-03-09T12:00:00.000Z',
    ]);
  });

  it('P1D in New York stays at 08:00 across fall back (2026-11-01)', () => {
    const anchor = '2026-10-30T12:00:00.000Z'; // 08:00-04:00
    expect(ticks(schedule('P1D', NEW_YORK), anchor, anchor, 3)).toEqual([
      '2026-10-31T12:00:00.000Z',
      '2026-11-01T13:00:00.000Z',
      '2026-11-02T13:00:00.000Z',
    ]);
  });

  it('moves a wall time that does not exist forward by the gap, and returns to it the next day', () => {
    const amsterdam = '2026-03-27T01:30:00.000Z'; // 02:30+01:00
    expect(localTicks(schedule('P1D', AMSTERDAM), amsterdam, amsterdam, 3)).toEqual([
      '2026-03-28T02:30+01:00',
      '2026-03-29T03:30+02:00',
      '2026-03-30T02:30+02:00',
    ]);
    const newYork = '2026-03-06T07:30:00.000Z'; // 02:30-05:00
    expect(localTicks(schedule('P1D', NEW_YORK), newYork, newYork, 3)).toEqual([
      '2026-03-07T02:30-05:00',
      '2026-03-08T03:30-04:00',
      '2026-03-09T02:30-04:00',
    ]);
  });

  it('picks the occurrence of a doubled wall time whose offset matches the anchor', () => {
    // Anchor in summer time: the first 02:30 (+02:00).
    const summer = '2026-10-23T00:30:00.000Z';
    expect(localTicks(schedule('P1D', AMSTERDAM), summer, summer, 3)).toEqual([
      '2026-10-24T02:30+02:00',
      '2026-10-25T02:30+02:00',
      '2026-10-26T02:30+01:00',
    ]);
    // Anchor in winter time: the second 02:30 (+01:00).
    const winter = '2026-01-10T01:30:00.000Z';
    expect(localTicks(schedule('P1D', AMSTERDAM), winter, '2026-10-24T12:00:00.000Z', 2)).toEqual([
      '2026-10-25T02:30+01:00',
      '2026-10-26T02:30+01:00',
    ]);
    // The same in New York at 01:30.
    const nySummer = '2026-10-30T05:30:00.000Z';
    expect(localTicks(schedule('P1D', NEW_YORK), nySummer, '2026-10-31T12:00:00.000Z', 1)).toEqual(['2026-11-01T01:30-04:00']);
    const nyWinter = '2026-01-01T06:30:00.000Z';
    expect(localTicks(schedule('P1D', NEW_YORK), nyWinter, '2026-10-31T12:00:00.000Z', 1)).toEqual(['2026-11-01T01:30-05:00']);
  });

  it('P1W keeps the weekday and the wall time across DST', () => {
    const anchor = '2026-03-16T08:00:00.000Z'; // Monday 09:00+01:00
    expect(localTicks(schedule('P1W', AMSTERDAM), anchor, anchor, 3)).toEqual([
      '2026-03-23T09:00+01:00',
      '2026-03-30T09:00+02:00',
      '2026-04-06T09:00+02:00',
    ]);
  });

  it('P1DT12H adds the day on the calendar and the hours as elapsed time', () => {
    expect(ticks(schedule('P1DT12H'), '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', 2)).toEqual([
      '2026-01-02T12:00:00.000Z',
      '2026-01-04T00:00:00.000Z',
    ]);
  });
});

describe('nextTickAfter: months and years', () => {
  it('P1M from January 31 takes the last day of shorter months without drifting', () => {
    const anchor = '2026-01-31T07:00:00.000Z'; // 08:00+01:00
    expect(localTicks(schedule('P1M', AMSTERDAM), anchor, anchor, 5)).toEqual([
      '2026-02-28T08:00+01:00',
      '2026-03-31T08:00+02:00',
      '2026-04-30T08:00+02:00',
      '2026-05-31T08:00+02:00',
      '2026-06-30T08:00+02:00',
    ]);
  });

  it('P1M asked from inside February still answers March 31, not March 28', () => {
    const anchor = '2026-01-31T07:00:00.000Z';
    expect(nextTickAfter(schedule('P1M', AMSTERDAM), at(anchor), at('2026-02-28T07:00:00.000Z')).toISOString()).toBe(
      '2026-03-31T06:00:00.000Z',
    );
  });

  it('P1M reaches February 29 in a leap year', () => {
    const anchor = '2028-01-31T12:00:00.000Z';
    expect(ticks(schedule('P1M'), anchor, anchor, 1)).toEqual(['2028-02-29T12:00:00.000Z']);
  });

  it('P3M steps quarters from the anchor', () => {
    const anchor = '2025-11-30T09:00:00.000Z';
    expect(ticks(schedule('P3M'), anchor, anchor, 3)).toEqual([
      '2026-02-28T09:00:00.000Z',
      '2026-05-30T09:00:00.000Z',
      '2026-08-30T09:00:00.000Z',
    ]);
  });

  it('P1Y from February 29 lands on February 28, and on the 29th again in leap years', () => {
    const anchor = '2024-02-29T00:00:00.000Z';
    expect(ticks(schedule('P1Y'), anchor, anchor, 4)).toEqual([
      '2025-02-28T00:00:00.000Z',
      '2026-02-28T00:00:00.000Z',
      '2027-02-28T00:00:00.000Z',
      '2028-02-29T00:00:00.000Z',
    ]);
  });
});

describe('nextTickAfter: startAt and old anchors', () => {
  it('a future startAt is the first tick', () => {
    const startAt = '2026-06-01T06:00:00.000Z';
    const s = schedule('P1D', AMSTERDAM, startAt);
    expect(nextTickAfter(s, at(startAt), at('2026-05-20T10:00:00.000Z')).toISOString()).toBe(startAt);
    expect(nextTickAfter(s, at(startAt), at(startAt)).toISOString()).toBe('2026-06-02T06:00:00.000Z');
    expect(nextTickAfter(schedule('PT15M', 'UTC', startAt), at(startAt), at('2026-05-31T23:59:00.000Z')).toISOString()).toBe(startAt);
  });

  it('jumps to an anchor decades back with a handful of date computations', () => {
    const plus = vi.spyOn(DateTime.prototype, 'plus');
    const anchor = '1996-01-01T07:00:00.000Z'; // 08:00 in Amsterdam
    expect(localTicks(schedule('P1D', AMSTERDAM), anchor, '2026-06-15T12:00:00.000Z', 1)).toEqual(['2026-06-16T08:00+02:00']);
    expect(plus.mock.calls.length).toBeLessThan(20);

    plus.mockClear();
    const monthly = '1990-01-31T12:00:00.000Z';
    expect(nextTickAfter(schedule('P1M'), at(monthly), at('2026-02-15T00:00:00.000Z')).toISOString()).toBe('2026-02-28T12:00:00.000Z');
    expect(plus.mock.calls.length).toBeLessThan(20);

    plus.mockClear();
    const yearly = '1930-07-04T12:00:00.000Z';
    expect(nextTickAfter(schedule('P1Y', NEW_YORK), at(yearly), at('2026-08-01T00:00:00.000Z')).toISOString()).toBe('2027-07-04T12:00:00.000Z');
    expect(plus.mock.calls.length).toBeLessThan(20);
  });

  it('computes elapsed steps from an old anchor by arithmetic', () => {
    expect(nextTickAfter(schedule('PT15M'), at('2000-01-01T00:05:00.000Z'), at('2026-07-01T12:34:56.789Z')).toISOString()).toBe(
      '2026-07-01T12:35:00.000Z',
    );
  });

  afterEach(() => {
    vi.restoreAllMocks();
  });
});

describe('nextTickAfter: cron', () => {
  const anyAnchor = at('2001-01-01T00:00:00.000Z'); // cron ignores the anchor

  it('0 8 * * * in Amsterdam fires at 08:00 local across spring forward and fall back', () => {
    const s = schedule('0 8 * * *', AMSTERDAM);
    expect(ticks(s, anyAnchor.toISOString(), '2026-03-27T12:00:00.000Z', 3)).toEqual([
      '2026-03-28T07:00:00.000Z',
      '2026-03-29T06:00:00.000Z',
      '2026-03-30T06:00:00.000Z',
    ]);
    expect(ticks(s, anyAnchor.toISOString(), '2026-10-23T12:00:00.000Z', 3)).toEqual([
      '2026-10-24T06:00:00.000Z',
      '2026-10-25T07:00:00.000Z',
      '2026-10-26T07:00:00.000Z',
    ]);
  });

  it('0 8 * * * in New York fires at 08:00 local across both changes', () => {
    const s = schedule('0 8 * * *', NEW_YORK);
    expect(ticks(s, anyAnchor.toISOString(), '2026-03-07T14:00:00.000Z', 2)).toEqual(['2026-03-08T12:00:00.000Z', '2026-03-09T12:00:00.000Z']);
    expect(ticks(s, anyAnchor.toISOString(), '2026-10-31T13:00:00.000Z', 2)).toEqual(['2026-11-01T13:00:00.000Z', '2026-11-02T13:00:00.000Z']);
  });

  it('answers strictly after a fire time', () => {
    const s = schedule('*/15 * * * *');
    expect(nextTickAfter(s, anyAnchor, at('2026-01-01T10:15:00.000Z')).toISOString()).toBe('2026-01-01T10:30:00.000Z');
    expect(nextTickAfter(s, anyAnchor, at('2026-01-01T10:14:59.999Z')).toISOString()).toBe('2026-01-01T10:15:00.000Z');
    expect(nextTickAfter(s, anyAnchor, at('2026-01-01T10:15:00.001Z')).toISOString()).toBe('2026-01-01T10:30:00.000Z');
  });

  it('fires a skipped wall time once after the gap and a doubled one once', () => {
    const s = schedule('30 2 * * *', AMSTERDAM);
    expect(localTicks(s, anyAnchor.toISOString(), '2026-03-28T12:00:00.000Z', 2)).toEqual(['2026-03-29T03:30+02:00', '2026-03-30T02:30+02:00']);
    expect(localTicks(s, anyAnchor.toISOString(), '2026-10-24T12:00:00.000Z', 2)).toEqual(['2026-10-25T02:30+01:00', '2026-10-26T02:30+01:00']);
  });

  it('weekday expressions count days in the zone, not in UTC', () => {
    // 00:30 Monday in Amsterdam is still Sunday in UTC.
    const s = schedule('30 0 * * MON', AMSTERDAM);
    expect(nextTickAfter(s, anyAnchor, at('2026-06-01T00:00:00.000Z')).toISOString()).toBe('2026-06-07T22:30:00.000Z');
  });

  it('never fires before startAt, and fires on startAt when it matches', () => {
    const startAt = '2026-06-10T09:30:00.000Z';
    const s = schedule('0 * * * *', 'UTC', startAt);
    expect(nextTickAfter(s, at(startAt), at('2026-06-01T00:00:00.000Z')).toISOString()).toBe('2026-06-10T10:00:00.000Z');
    expect(nextTickAfter(s, at(startAt), at('2026-06-11T00:20:00.000Z')).toISOString()).toBe('2026-06-11T01:00:00.000Z');
    const onTheHour = schedule('0 * * * *', 'UTC', '2026-06-10T09:00:00.000Z');
    expect(nextTickAfter(onTheHour, at('2026-06-10T09:00:00.000Z'), at('2026-06-01T00:00:00.000Z')).toISOString()).toBe(
      '2026-06-10T09:00:00.000Z',
    );
  });
});

describe('nextTickAfter: cron asked from inside a night whose clocks change', () => {
  // From any minute of the night, the next tick is the series' next one, as walked from the day
  // before. croner alone skipped one: from 00:31Z on Amsterdam's fall-back night `30 2 * * *`
  // answered the next day, and `*/20 1-3 * * *` in London skipped 01:00Z from 00:04Z.
  const cases = [
    { interval: '30 2 * * *', zone: AMSTERDAM, night: '2026-10-25T00:00:00Z' },
    { interval: '30 2 * * *', zone: AMSTERDAM, night: '2026-03-29T00:00:00Z' },
    { interval: '*/20 1-3 * * *', zone: 'Europe/London', night: '2026-10-24T23:00:00Z' },
    { interval: '*/20 1-3 * * *', zone: 'Europe/London', night: '2026-03-28T23:00:00Z' },
    { interval: '0 2 * * *', zone: NEW_YORK, night: '2026-11-01T04:00:00Z' },
    { interval: '15 1,2,3 * * *', zone: NEW_YORK, night: '2026-03-08T05:00:00Z' },
    // From inside the Americas' repeated hour croner answered a time already past (06:05Z →
    // 05:20Z), and a trigger due in the past ran the same tick every second (a review).
    { interval: '*/20 * * * *', zone: NEW_YORK, night: '2026-11-01T04:00:00Z' },
    { interval: '30 1 * * *', zone: NEW_YORK, night: '2026-11-01T04:00:00Z' },
    { interval: '*/15 * * * *', zone: 'America/Los_Angeles', night: '2026-11-01T07:00:00Z' },
    { interval: '30 23 * * *', zone: 'America/Santiago', night: '2026-04-05T00:00:00Z' },
  ];
  for (const { interval, zone, night } of cases) {
    it(`${interval} in ${zone}, the night of ${night.slice(0, 10)}`, () => {
      const s = schedule(interval, zone);
      const start = at(night).getTime() - 86_400_000;
      const series = ticks(s, night, new Date(start).toISOString(), 200).map((iso) => at(iso).getTime());
      for (let minute = 0; minute < 6 * 60; minute += 1) {
        const from = at(night).getTime() + minute * 60_000 + 30_000;
        const expected = series.find((tick) => tick > from)!;
        expect(nextTickAfter(s, at(night), new Date(from)).getTime(), new Date(from).toISOString()).toBe(expected);
        // And after a downtime that ends there, the tick that runs is the series' latest.
        const latest = [...series].reverse().find((tick) => tick <= from)!;
        expect(latestTickAtOrBefore(s, at(night), new Date(from))!.getTime(), `latest at ${new Date(from).toISOString()}`).toBe(latest);
      }
    });
  }
});

describe('cron every minute inside the Americas\' repeated hour', () => {
  // croner answered a time already past from inside it, and the search for the latest tick,
  // fed such answers, never ended: a scheduler with such a trigger froze (a verification round).
  it.each([
    [NEW_YORK, '2026-11-01T06:05:00Z', '2026-11-01T05:59:00.000Z', '2026-11-01T07:00:00.000Z'],
    [NEW_YORK, '2026-11-01T06:59:30Z', '2026-11-01T05:59:00.000Z', '2026-11-01T07:00:00.000Z'],
    ['America/Chicago', '2026-11-01T07:10:00Z', '2026-11-01T06:59:00.000Z', '2026-11-01T08:00:00.000Z'],
    ['America/Havana', '2026-11-01T05:10:00Z', '2026-11-01T04:59:00.000Z', '2026-11-01T06:00:00.000Z'],
  ])('in %s at %s: the latest tick is the first hour\'s last minute, the next one after the hour', (zone, now, latest, next) => {
    const s = schedule('*/1 * * * *', zone);
    expect(latestTickAtOrBefore(s, at(now), at(now))!.toISOString()).toBe(latest);
    expect(nextTickAfter(s, at(now), at(now)).toISOString()).toBe(next);
  });
});

describe('latestTickAtOrBefore', () => {
  it('is null before the anchor and the anchor itself at the anchor', () => {
    const anchor = at('2026-01-01T00:00:00.000Z');
    expect(latestTickAtOrBefore(schedule('PT15M'), anchor, at('2025-12-31T23:59:59.999Z'))).toBeNull();
    expect(latestTickAtOrBefore(schedule('PT15M'), anchor, anchor)?.toISOString()).toBe('2026-01-01T00:00:00.000Z');
    expect(latestTickAtOrBefore(schedule('P1M', AMSTERDAM), anchor, at('2025-12-01T00:00:00.000Z'))).toBeNull();
  });

  it('returns only the latest of the ticks missed during a downtime (PT15M)', () => {
    const anchor = at('2026-01-01T00:00:00.000Z');
    expect(latestTickAtOrBefore(schedule('PT15M'), anchor, at('2026-01-01T07:52:10.000Z'))?.toISOString()).toBe('2026-01-01T07:45:00.000Z');
    expect(latestTickAtOrBefore(schedule('PT15M'), anchor, at('2026-01-01T08:00:00.000Z'))?.toISOString()).toBe('2026-01-01T08:00:00.000Z');
  });

  it('returns the latest missed P1D tick at 08:00 local across spring forward', () => {
    const anchor = at('2026-03-20T07:00:00.000Z'); // 08:00+01:00
    const s = schedule('P1D', AMSTERDAM);
    // Down from the 26th to 10:00 local on the 31st: only the 31st 08:00 runs.
    expect(latestTickAtOrBefore(s, anchor, at('2026-03-31T08:00:00.000Z'))?.toISOString()).toBe('2026-03-31T06:00:00.000Z');
    // Back up at 07:00 local on the 31st: that day's tick is not due yet.
    expect(latestTickAtOrBefore(s, anchor, at('2026-03-31T05:00:00.000Z'))?.toISOString()).toBe('2026-03-30T06:00:00.000Z');
  });

  it('returns the latest missed P1D tick at 08:00 local across fall back in New York', () => {
    const anchor = at('2026-10-01T12:00:00.000Z'); // 08:00-04:00
    const s = schedule('P1D', NEW_YORK);
    expect(latestTickAtOrBefore(s, anchor, at('2026-11-01T12:30:00.000Z'))?.toISOString()).toBe('2026-10-31T12:00:00.000Z');
    expect(latestTickAtOrBefore(s, anchor, at('2026-11-01T13:00:00.000Z'))?.toISOString()).toBe('2026-11-01T13:00:00.000Z');
  });

  it('P1M from January 31 gives February 28 in mid-March', () => {
    const anchor = at('2026-01-31T07:00:00.000Z');
    expect(latestTickAtOrBefore(schedule('P1M', AMSTERDAM), anchor, at('2026-03-15T00:00:00.000Z'))?.toISOString()).toBe(
      '2026-02-28T07:00:00.000Z',
    );
  });

  it('cron: the latest fire time in the zone, including one exactly at now', () => {
    const s = schedule('0 8 * * *', AMSTERDAM);
    const anchor = at('2026-01-01T00:00:00.000Z');
    expect(latestTickAtOrBefore(s, anchor, at('2026-03-31T05:00:00.000Z'))?.toISOString()).toBe('2026-03-30T06:00:00.000Z');
    expect(latestTickAtOrBefore(s, anchor, at('2026-03-31T06:00:00.000Z'))?.toISOString()).toBe('2026-03-31T06:00:00.000Z');
    expect(latestTickAtOrBefore(s, anchor, at('2026-10-26T06:59:59.999Z'))?.toISOString()).toBe('2026-10-25T07:00:00.000Z');
  });

  it('cron: every minute floors to the minute', () => {
    expect(latestTickAtOrBefore(schedule('* * * * *'), at('2026-01-01T00:00:00.000Z'), at('2026-05-05T05:05:59.999Z'))?.toISOString()).toBe(
      '2026-05-05T05:05:00.000Z',
    );
  });

  it('cron: finds a fire time years back (February 29)', () => {
    expect(
      latestTickAtOrBefore(schedule('0 0 29 2 *', AMSTERDAM), at('2020-01-01T00:00:00.000Z'), at('2027-06-01T00:00:00.000Z'))?.toISOString(),
    ).toBe('2024-02-28T23:00:00.000Z');
  });

  it('cron: null before startAt and before the first fire time at or after it', () => {
    const startAt = '2026-06-10T09:30:00.000Z';
    const s = schedule('0 * * * *', 'UTC', startAt);
    expect(latestTickAtOrBefore(s, at(startAt), at('2026-06-10T09:00:00.000Z'))).toBeNull();
    expect(latestTickAtOrBefore(s, at(startAt), at('2026-06-10T09:59:59.999Z'))).toBeNull();
    expect(latestTickAtOrBefore(s, at(startAt), at('2026-06-10T10:00:00.000Z'))?.toISOString()).toBe('2026-06-10T10:00:00.000Z');
    expect(latestTickAtOrBefore(s, at(startAt), at('2026-06-12T17:45:00.000Z'))?.toISOString()).toBe('2026-06-12T17:00:00.000Z');
  });

  it('agrees with nextTickAfter: latest ≤ now < the tick after it, for every kind of interval', () => {
    const cases: Array<[Schedule, string]> = [
      [schedule('PT15M', AMSTERDAM), '2026-03-01T00:07:00.000Z'],
      [schedule('PT1H30M', NEW_YORK), '2026-02-11T03:00:00.000Z'],
      [schedule('P1D', AMSTERDAM), '2026-01-01T01:30:00.000Z'],
      [schedule('P1D', NEW_YORK), '2026-01-01T06:30:00.000Z'],
      [schedule('P1W', NEW_YORK), '2025-12-29T14:00:00.000Z'],
      [schedule('P1M', AMSTERDAM), '2025-10-31T07:00:00.000Z'],
      [schedule('P1DT12H', AMSTERDAM), '2026-01-01T00:00:00.000Z'],
      [schedule('0 8 * * *', AMSTERDAM), '2026-01-01T00:00:00.000Z'],
      [schedule('30 2 * * *', AMSTERDAM), '2026-01-01T00:00:00.000Z'],
      [schedule('*/20 9-17 * * MON-FRI', NEW_YORK), '2026-01-01T00:00:00.000Z'],
    ];
    // Three days around each DST change in both zones, at times that drift across the clock.
    const nows: string[] = [];
    for (const from of ['2026-03-07', '2026-03-28', '2026-10-24', '2026-10-31']) {
      for (let t = Date.parse(`${from}T00:00:00.000Z`), end = t + 3 * 86_400_000; t < end; t += 4 * 3_600_000 + 37 * 60_000) {
        nows.push(new Date(t).toISOString());
      }
    }
    for (const [s, anchorIso] of cases) {
      const anchor = at(anchorIso);
      for (const nowIso of nows) {
        const now = at(nowIso);
        const latest = latestTickAtOrBefore(s, anchor, now);
        const next = nextTickAfter(s, anchor, now);
        const context = `${s.interval} ${s.timezone} at ${nowIso}`;
        expect(latest, context).not.toBeNull();
        expect(latest!.getTime(), context).toBeLessThanOrEqual(now.getTime());
        expect(next.getTime(), context).toBeGreaterThan(now.getTime());
        expect(nextTickAfter(s, anchor, latest!).getTime(), context).toBe(next.getTime());
        expect(latestTickAtOrBefore(s, anchor, next)?.getTime(), context).toBe(next.getTime());
      }
    }
  });
});
