/**
 * When a schedule ticks. Pure functions: every time comes in as an argument.
 *
 * The *anchor* is where a series starts: `startAt` when the schedule has one, else the time the
 * trigger was created (callers pass it). For a duration interval, tick n is anchor + n × interval
 * for n = 0, 1, 2, …; the anchor itself is tick 0, so a future `startAt` is the first tick, and a
 * trigger created at T without one first ticks at T + interval (asked for the tick after T).
 *
 * - Durations of hours, minutes and seconds only are elapsed time: PT15M is every 15 real minutes
 *   whatever the clocks do.
 * - Durations with a year, month, week or day part are calendar steps in the schedule's zone
 *   (Luxon `plus` on the anchor's wall time): a P1D series at 08:00 stays at 08:00 local across
 *   DST. Tick n is computed from the anchor, never from tick n-1, so months do not drift
 *   (Jan 31 → Feb 28 → Mar 31). Time parts of a mixed duration (P1DT12H) are added as elapsed
 *   time after the calendar part, as Luxon does.
 *   Wall times that do not exist (02:30 on a spring-forward day) move forward by the gap (03:30).
 *   Wall times that happen twice (02:30 on a fall-back day) keep the anchor's UTC offset when it
 *   is one of the two: an anchor in summer time picks the first 02:30, one in winter the second.
 * - Cron intervals are the expression's fire times in the zone (croner); the anchor plays no part
 *   except that nothing fires before `startAt`. croner fires a non-existent wall time once the
 *   clocks have moved past it (02:30 → 03:30) and a doubled one once: at the second occurrence
 *   where the clocks go back at 03:00 (Europe: 02:30 fires at 02:30 +01:00), at the first where
 *   they go back at 02:00 (the Americas: 01:30 fires at 01:30 −04:00 in New York, and a series
 *   every 20 minutes at 01:00, 01:20, 01:40 of the first hour only). Either way, once.
 */
import { Cron } from 'croner';
import { DateTime } from 'luxon';
import { LAST_ISO_INSTANT_MS } from '../../lib/clock.js';
import { averageStepMs, parseInterval, type DurationParts, type Schedule } from './schedule.js';

const MINUTE_MS = 60_000;
/** How far back to look for a cron fire time before deciding there is none (no startAt). */
const CRON_LOOKBACK_MS = 400 * 365 * 86_400_000;

/**
 * The trigger's next run strictly after `after`, or null when its series has ended: past
 * the year 9999 (a later tick, stored as text, sorted before every time and was due for ever:
 * lib/clock.ts), or a cron expression with no fire time left (croner looks up to the year 3000).
 */
export function nextRunAfter(schedule: Schedule, anchor: Date, after: Date): Date | null {
  const next = nextTickOrNull(schedule, anchor, after);
  return next !== null && next.getTime() <= LAST_ISO_INSTANT_MS ? next : null;
}

/** The first tick strictly after `after`. */
export function nextTickAfter(schedule: Schedule, anchor: Date, after: Date): Date {
  const next = nextTickOrNull(schedule, anchor, after);
  if (next === null) throw new Error(`cron expression "${schedule.interval}" has no fire time after ${after.toISOString()}`);
  return next;
}

function nextTickOrNull(schedule: Schedule, anchor: Date, after: Date): Date | null {
  const interval = parseInterval(schedule.interval);
  const start = anchor.getTime();
  const limit = after.getTime();

  if (interval.kind === 'cron') {
    return nextCronTick(schedule, interval.expression, limit);
  }
  if (limit < start) return new Date(start);
  if (interval.kind === 'elapsed') {
    return new Date(start + (Math.floor((limit - start) / interval.ms) + 1) * interval.ms);
  }
  const tickAt = calendarSeries(interval.parts, schedule.timezone, anchor);
  const guess = Math.floor((limit - start) / averageStepMs(interval.parts));
  return new Date(tickAt(lastIndexAtOrBefore(tickAt, limit, guess) + 1));
}

/**
 * The most recent tick at or before `now`, or null when the series has not started. After a
 * downtime only this tick runs, not every one that was missed.
 */
export function latestTickAtOrBefore(schedule: Schedule, anchor: Date, now: Date): Date | null {
  const interval = parseInterval(schedule.interval);
  const start = anchor.getTime();
  const limit = now.getTime();

  if (interval.kind === 'cron') {
    return latestCronTick(schedule, interval.expression, limit);
  }
  if (limit < start) return null;
  if (interval.kind === 'elapsed') {
    return new Date(start + Math.floor((limit - start) / interval.ms) * interval.ms);
  }
  const tickAt = calendarSeries(interval.parts, schedule.timezone, anchor);
  const guess = Math.floor((limit - start) / averageStepMs(interval.parts));
  return new Date(tickAt(lastIndexAtOrBefore(tickAt, limit, guess)));
}

/** Tick n of a calendar series, in epoch milliseconds. */
function calendarSeries(parts: DurationParts, timezone: string, anchor: Date): (n: number) => number {
  const start = DateTime.fromJSDate(anchor, { zone: timezone });
  return (n) =>
    start
      .plus({
        years: parts.years * n,
        months: parts.months * n,
        weeks: parts.weeks * n,
        days: parts.days * n,
        hours: parts.hours * n,
        minutes: parts.minutes * n,
        seconds: parts.seconds * n,
      })
      .toMillis();
}

/**
 * The largest n with tickAt(n) ≤ limit, given tickAt(0) ≤ limit and tickAt increasing.
 * Month lengths and DST make the average-length guess a little off, so bracket it by widening
 * steps and then bisect: a handful of date computations even for an anchor decades back.
 */
function lastIndexAtOrBefore(tickAt: (n: number) => number, limit: number, guess: number): number {
  let low = Math.max(0, guess);
  let high = low + 1;
  for (let step = 1; low > 0 && tickAt(low) > limit; step *= 2) {
    high = low;
    low = Math.max(0, low - step);
  }
  for (let step = 1; tickAt(high) <= limit; step *= 2) {
    low = high;
    high += step;
  }
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (tickAt(middle) <= limit) low = middle;
    else high = middle;
  }
  return low;
}

/** Longer than any daylight saving shift (two hours at most, at Antarctica's Troll station). */
const DST_WINDOW_MS = 3 * 3_600_000;

function nextCronTick(schedule: Schedule, expression: string, after: number): Date | null {
  const cron = new Cron(expression, { timezone: schedule.timezone });
  const startAt = schedule.startAt === undefined ? undefined : Date.parse(schedule.startAt);
  // croner answers strictly after the time it is given, so starting one millisecond before
  // startAt lets startAt itself be a tick.
  const from = startAt !== undefined && after < startAt ? startAt - 1 : after;
  return fireTimeAfter(cron, schedule.timezone, from);
}

/**
 * The series' first fire time strictly after `from`. Asked from inside a night whose clocks
 * change, croner can skip the series' next fire time (from 00:31Z on Amsterdam's fall-back night,
 * `30 2 * * *` answered the next day, not the second 02:30 at 01:30Z), or answer one already
 * past: from inside New York's repeated hour (06:05Z on its fall-back night), every 20 minutes
 * answered 05:20Z, the first 01:20, and a trigger due in the past ran the same tick again every
 * second (a review). Its answers are right when it walks the series from before the change, so
 * near one, or whenever its answer is not after `from`, it walks from DST_WINDOW_MS earlier.
 */
function fireTimeAfter(cron: Cron, timezone: string, from: number): Date | null {
  const next = cron.nextRun(new Date(from));
  if (next === null) return null;
  if (next.getTime() > from && offsetAt(from - DST_WINDOW_MS, timezone) === offsetAt(next.getTime(), timezone)) return next;
  let walked = cron.nextRun(new Date(from - DST_WINDOW_MS));
  while (walked !== null && walked.getTime() <= from) {
    const further = cron.nextRun(walked);
    // A walk that stops moving forward would loop: say so rather than answer a time past.
    if (further !== null && further.getTime() <= walked.getTime()) {
      throw new Error(`cron expression "${cron.getPattern()}" in ${timezone}: no fire time after ${walked.toISOString()} could be found`);
    }
    walked = further;
  }
  return walked;
}

const offsetAt = (ms: number, zone: string): number => DateTime.fromMillis(ms, { zone }).offset;

/**
 * croner only looks forward, so search backwards. Invariant: some fire time lies in (low, now]
 * and none in (high, now]. Widen a window behind `now` until it holds a fire time, halve it
 * down to a few spacings of the series, then walk the fire times left. About five croner calls
 * for a regular series (each costs about half a millisecond), a few dozen for irregular ones.
 */
function latestCronTick(schedule: Schedule, expression: string, now: number): Date | null {
  // Walked as fireTimeAfter walks it: croner's own answer from inside the Americas' repeated hour
  // is a time already past, and the search below, fed such answers for an every-minute series,
  // never ended (a verification round: a scheduler froze).
  const cron = new Cron(expression, { timezone: schedule.timezone });
  const fireAfter = (from: number): number | null => fireTimeAfter(cron, schedule.timezone, from)?.getTime() ?? null;
  const firesBy = (from: number): boolean => (fireAfter(from) ?? Infinity) <= now;
  const earliest = schedule.startAt === undefined ? now - CRON_LOOKBACK_MS : Date.parse(schedule.startAt) - 1;
  if (now <= earliest) return null;

  // The gap between the next two fire times is a fair guess at how far back the last one is.
  const upcoming = fireAfter(now);
  const following = upcoming === null ? null : fireAfter(upcoming);
  const spacing = upcoming !== null && following !== null ? following - upcoming : MINUTE_MS;

  let high = now;
  let low: number | undefined;
  for (let span = spacing; low === undefined; span *= 2) {
    const from = Math.max(now - span, earliest);
    if (firesBy(from)) low = from;
    else if (from === earliest) return null;
    else high = from;
  }
  for (;;) {
    if (high - low <= 4 * spacing) {
      const walked = walkFireTimes(fireAfter, low, now);
      if (walked.done) return new Date(walked.latest);
      // A burst denser than the guess (every minute of one hour): keep halving between walks.
      low = walked.latest - 1;
    }
    const middle = Math.floor((low + high) / 2);
    if (firesBy(middle)) low = middle;
    else high = middle;
  }
}

/** Walks at most a few fire times after `low` (the first is ≤ now); done when the next is > now. */
function walkFireTimes(
  fireAfter: (from: number) => number | null,
  low: number,
  now: number,
): { done: boolean; latest: number } {
  let latest = fireAfter(low) as number;
  for (let step = 0; step < 8; step++) {
    const next = fireAfter(latest);
    if (next === null || next > now) return { done: true, latest };
    latest = next;
  }
  return { done: false, latest };
}
