/**
 * A trigger's schedule (DESIGN §9): what a request may send and how its interval is read.
 *
 * Words: the *interval* says how ticks repeat (an ISO 8601 duration or a 5-field cron
 * expression); the *timezone* is the IANA zone calendar steps and cron fields are read in;
 * `startAt` optionally fixes where the series begins.
 */
import { Cron } from 'croner';
import { DateTime, IANAZone } from 'luxon';
import { invalidRequest } from '../../lib/errors.js';
import { LAST_ISO_INSTANT_MS } from '../../lib/clock.js';

/** A validated schedule as stored and answered. `startAt` is ISO 8601 UTC with milliseconds. */
export interface Schedule {
  interval: string;
  timezone: string;
  startAt?: string;
}

/** The parts of an ISO 8601 duration; all whole numbers, none negative. */
export interface DurationParts {
  years: number;
  months: number;
  weeks: number;
  days: number;
  hours: number;
  minutes: number;
  seconds: number;
}

/**
 * How an interval repeats:
 * - `elapsed`: only hours/minutes/seconds, so a fixed number of real milliseconds per step;
 * - `calendar`: a year, month, week or day part, so steps move the wall clock in the zone;
 * - `cron`: fire times of a 5-field cron expression in the zone.
 */
export type ParsedInterval =
  | { kind: 'elapsed'; ms: number }
  | { kind: 'calendar'; parts: DurationParts }
  | { kind: 'cron'; expression: string };

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
/** Average lengths, only used to guess how many steps fit in a span (next-tick.ts corrects the guess). */
const AVERAGE_YEAR_MS = 365.2425 * DAY_MS;
const AVERAGE_MONTH_MS = AVERAGE_YEAR_MS / 12;
/** Longer intervals are refused: they are surely typos, and they would push Date arithmetic out of range. */
const MAX_INTERVAL_MS = 100 * AVERAGE_YEAR_MS;

const DURATION =
  /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/;
const DATE_TIME_WITH_OFFSET =
  /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/;
const KNOWN_FIELDS = new Set(['interval', 'timezone', 'startAt']);

const INTERVAL_HINT =
  'body.schedule.interval must be an ISO 8601 duration (such as PT15M, P1D, P1M) or a 5-field cron expression';

/** Validates a request body's `schedule` object; every problem is a 400 naming the field. */
export function parseSchedule(input: unknown): Schedule {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw invalidRequest('body.schedule must be an object');
  }
  const body = input as Record<string, unknown>;
  for (const key of Object.keys(body)) {
    if (!KNOWN_FIELDS.has(key)) throw invalidRequest(`body.schedule.${key} is not a known field`);
  }

  const interval = requireString(body.interval, 'body.schedule.interval');
  const parsed = parseInterval(interval);
  const timezone = requireString(body.timezone, 'body.schedule.timezone');
  if (!isIanaZone(timezone)) {
    throw invalidRequest('body.schedule.timezone must be an IANA time zone name such as Europe/Amsterdam or UTC');
  }

  const schedule: Schedule = { interval, timezone };
  // null is accepted as "no startAt" so that PATCH can clear it (DESIGN §2).
  if (body.startAt !== undefined && body.startAt !== null) {
    schedule.startAt = parseStartAt(body.startAt);
    if (parsed.kind === 'cron') requireCronTickFrom(parsed.expression, timezone, schedule.startAt);
  }
  return schedule;
}

/** Reads an interval string; throws `invalid_request` naming `body.schedule.interval`. */
export function parseInterval(text: string): ParsedInterval {
  if (text.startsWith('P')) return parseDuration(text);
  return parseCron(text);
}

/** A rough length of one calendar step, for guessing a step count; never used as a tick time. */
export function averageStepMs(parts: DurationParts): number {
  return (
    parts.years * AVERAGE_YEAR_MS +
    parts.months * AVERAGE_MONTH_MS +
    (parts.weeks * 7 + parts.days) * DAY_MS +
    timePartMs(parts)
  );
}

function parseDuration(text: string): ParsedInterval {
  const match = DURATION.exec(text);
  // "P" alone and a trailing "T" with no time part match the pattern but are not durations.
  if (!match || text === 'P' || text.endsWith('T')) throw invalidRequest(INTERVAL_HINT);
  const [years, months, weeks, days, hours, minutes, seconds] = match
    .slice(1)
    .map((part) => (part === undefined ? 0 : Number(part)));
  const parts: DurationParts = { years, months, weeks, days, hours, minutes, seconds };

  const length = averageStepMs(parts);
  if (length === 0) throw invalidRequest('body.schedule.interval must not be zero');
  if (length < MINUTE_MS) throw invalidRequest('body.schedule.interval must be at least PT1M');
  if (length > MAX_INTERVAL_MS) throw invalidRequest('body.schedule.interval must be at most P100Y');

  // Zero calendar parts (P0DT1H) do not make a step calendar-based: only non-zero ones count.
  const isCalendar = years + months + weeks + days > 0;
  return isCalendar ? { kind: 'calendar', parts } : { kind: 'elapsed', ms: timePartMs(parts) };
}

function parseCron(text: string): ParsedInterval {
  const fields = text.trim().split(/\s+/);
  if (fields.length === 1) throw invalidRequest(INTERVAL_HINT);
  if (fields.length !== 5) {
    const seconds = fields.length === 6 ? '; a seconds field is not supported' : '';
    throw invalidRequest(
      `${INTERVAL_HINT}: a cron expression has exactly 5 fields (minute hour day-of-month month day-of-week), this one has ${fields.length}${seconds}`,
    );
  }
  // croner replaces "?" with the current time's value, so the same text would mean different
  // schedules depending on when it is read.
  if (text.includes('?')) throw invalidRequest('body.schedule.interval must not use "?" in a cron expression');
  let cron: Cron;
  try {
    // UTC is enough to check the syntax; the zone is applied when ticks are computed.
    cron = new Cron(text, { timezone: 'UTC' });
  } catch (error) {
    throw invalidRequest(`body.schedule.interval is not a valid cron expression: ${(error as Error).message}`);
  }
  if (cron.nextRun() === null) throw invalidRequest('body.schedule.interval is a cron expression that never fires');
  return { kind: 'cron', expression: text };
}

/**
 * croner looks for fire times up to a limit (the year 3000 or so): a `startAt` past the last one
 * would leave the trigger with no next run, and computing it threw (a 500).
 */
function requireCronTickFrom(expression: string, timezone: string, startAt: string): void {
  if (new Cron(expression, { timezone }).nextRun(new Date(Date.parse(startAt) - 1)) === null) {
    throw invalidRequest('body.schedule.startAt is past the last time the cron expression fires');
  }
}

function parseStartAt(value: unknown): string {
  const message = 'body.schedule.startAt must be an ISO 8601 date-time with an offset, such as 2026-03-01T08:00:00+01:00';
  if (typeof value !== 'string' || !DATE_TIME_WITH_OFFSET.test(value)) throw invalidRequest(message);
  // Luxon rejects impossible dates (2026-02-30) that Date.parse would roll over.
  const parsed = DateTime.fromISO(value, { setZone: true });
  if (!parsed.isValid) throw invalidRequest(message);
  // Ticks are stored and compared as text: one past the year 9999 was due for ever (lib/clock.ts).
  if (parsed.toMillis() < 0 || parsed.toMillis() > LAST_ISO_INSTANT_MS) {
    throw invalidRequest('body.schedule.startAt must fall between 1970-01-01 and 9999-12-31 (UTC)');
  }
  return parsed.toJSDate().toISOString();
}

function isIanaZone(zone: string): boolean {
  // Fixed offsets are not zones: they know nothing of daylight saving time. Refused explicitly
  // in case a newer Intl accepts them as time zone names.
  if (/^[+-]/.test(zone)) return false;
  return IANAZone.isValidZone(zone);
}

function requireString(value: unknown, field: string): string {
  if (value === undefined || value === null) throw invalidRequest(`${field} is required`);
  if (typeof value !== 'string' || value.length === 0) throw invalidRequest(`${field} must be a non-empty string`);
  return value;
}

function timePartMs(parts: DurationParts): number {
  return (parts.hours * 60 + parts.minutes) * MINUTE_MS + parts.seconds * 1000;
}
