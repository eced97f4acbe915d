/**
 * When a wait is due: pure schedule arithmetic, every time passed in.
 *
 * Deadlines are absolute. A `wait` of P2D ends two days after it began, whether or not the run
 * was paused in between: a paused run's timers do not fire (a paused run is never claimed), and
 * on resume a wait with time left goes on waiting until its deadline, while one whose deadline
 * passed during the pause ends at once. Clinical waits ("call two days after discharge") keep
 * their meaning; a pause never silently pushes them back.
 */
import { DateTime, Duration } from 'luxon';
import type { WaitWith } from '../modules/blueprints/blueprint.js';

export class TimerSettingError extends Error {}

/** `now` plus an ISO 8601 duration, calendar-aware in UTC (P1M is a calendar month). */
export function afterDuration(now: Date, duration: string): string {
  const parsed = Duration.fromISO(duration);
  if (!parsed.isValid || parsed.toMillis() <= 0) {
    throw new TimerSettingError(`"${duration}" is not an ISO 8601 duration longer than zero`);
  }
  return DateTime.fromJSDate(now, { zone: 'utc' }).plus(parsed).toJSDate().toISOString();
}

/**
 * The next time strictly after `now` at which the wall clock in `timezone` reads `until`
 * (HH:MM or HH:MM:SS). A local time that does not exist that day (a DST gap) moves forward by
 * the gap, as luxon does; a doubled one (DST fall back) is taken at its first occurrence.
 */
export function nextLocalTime(now: Date, until: string, timezone: string): string {
  const match = /^(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(until);
  if (!match) throw new TimerSettingError(`"${until}" is not a local time HH:MM or HH:MM:SS`);
  const [hour, minute, second] = [Number(match[1]), Number(match[2]), Number(match[3] ?? 0)];
  const local = DateTime.fromJSDate(now, { zone: timezone });
  if (!local.isValid) throw new TimerSettingError(`"${timezone}" is not an IANA time zone`);
  const at = (day: DateTime) => day.set({ hour, minute, second, millisecond: 0 });
  let candidate = at(local);
  if (candidate.toMillis() <= now.getTime()) candidate = at(local.plus({ days: 1 }));
  return candidate.toJSDate().toISOString();
}

/** When a `wait` automation started at `now` is due. */
export function waitDueAt(settings: WaitWith, now: Date): string {
  return 'duration' in settings
    ? afterDuration(now, settings.duration)
    : nextLocalTime(now, settings.until, settings.timezone);
}
