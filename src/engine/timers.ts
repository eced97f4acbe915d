/**
 * When a wait is due: pure schedule arithmetic, every time passed in.
 *
 * Deadlines are absolute. A `wait` of P2D ends two days after it began, whether or not the run
 * was paused in between: a paused run's timers do not fire (a paused run is never claimed), and
 * on resume a wait with time left goes on waiting until its deadline, while one whose deadline
 * passed during the pause ends at once. Clinical waits ("call two days after discharge") keep
 * their meaning; a pause never silently pushes them back.
 */
import { DateTime } from 'luxon';
import type { WaitWith } from '../modules/blueprints/blueprint.js';
import { LAST_ISO_INSTANT_MS } from '../lib/clock.js';
import { forwardDuration } from '../lib/iso-duration.js';

export class TimerSettingError extends Error {}

/**
 * `now` plus an ISO 8601 duration, calendar-aware in UTC (P1M is a calendar month). A deadline
 * past the last instant ISO 8601 writes with four digits is that instant: `+010026-…` sorts
 * before every other stored time, and a wait of P8000Y ended at once (an engine review).
 */
export function afterDuration(now: Date, duration: string): string {
  const parsed = forwardDuration(duration);
  if (!parsed) throw new TimerSettingError(`"${duration}" is not an ISO 8601 duration longer than zero (no part may be negative)`);
  const due = DateTime.fromJSDate(now, { zone: 'utc' }).plus(parsed);
  // Invalid: past what a date can hold at all (P999999999Y).
  return new Date(!due.isValid || due.toMillis() > LAST_ISO_INSTANT_MS ? LAST_ISO_INSTANT_MS : due.toMillis()).toISOString();
}

/**
 * The next time strictly after `now` at which the wall clock in `timezone` reads `until`
 * (HH:MM or HH:MM:SS). A local time that does not exist that day (a DST gap) moves forward by
 * the gap, as luxon does. A local time that happens twice (DST fall back: 01:30 comes once in
 * summer time, then again an hour later in winter time) is due at whichever occurrence comes
 * first after `now`: at 01:57 summer time, "01:00" is three minutes away, not a day.
 */
export function nextLocalTime(now: Date, until: string, timezone: string): string {
  const match = /^(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(until);
  if (!match) throw new TimerSettingError(`"${until}" is not a local time HH:MM or HH:MM:SS`);
  const wall = { hour: Number(match[1]), minute: Number(match[2]), second: Number(match[3] ?? 0) };
  const local = DateTime.fromJSDate(now, { zone: timezone });
  if (!local.isValid) throw new TimerSettingError(`"${timezone}" is not an IANA time zone`);
  // The day before too: a zone that falls back across midnight shows yesterday's date again.
  for (const days of [-1, 0, 1, 2]) {
    const next = occurrences(local.plus({ days }), wall, timezone).find((at) => at > now.getTime());
    if (next !== undefined) return new Date(next).toISOString();
  }
  throw new Error(`no ${until} in ${timezone} within two days of ${now.toISOString()}`);
}

/**
 * The instants at which the wall clock in `timezone` reads `wall` on `day`'s date, earliest
 * first: one on most days, two on a fall-back day, and in a gap the instant luxon moves it to.
 */
function occurrences(day: DateTime, wall: { hour: number; minute: number; second: number }, timezone: string): number[] {
  const asIfUtc = Date.UTC(day.year, day.month - 1, day.day, wall.hour, wall.minute, wall.second);
  // Every offset the zone uses around that day; the wall time minus each is a candidate.
  const offsets = new Set([-1, 0, 1].map((d) => DateTime.fromMillis(asIfUtc + d * 86_400_000, { zone: timezone }).offset));
  const found = [...offsets]
    .map((offsetMinutes) => asIfUtc - offsetMinutes * 60_000)
    .filter((at) => {
      const seen = DateTime.fromMillis(at, { zone: timezone });
      return seen.day === day.day && seen.hour === wall.hour && seen.minute === wall.minute && seen.second === wall.second;
    })
    .sort((a, b) => a - b);
  if (found.length > 0) return found;
  return [DateTime.fromObject({ year: day.year, month: day.month, day: day.day, ...wall, millisecond: 0 }, { zone: timezone }).toMillis()];
}

/** When a `wait` automation started at `now` is due. */
export function waitDueAt(settings: WaitWith, now: Date): string {
  return 'duration' in settings
    ? afterDuration(now, settings.duration)
    : nextLocalTime(now, settings.until, settings.timezone);
}
