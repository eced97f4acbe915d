/**
 * Time comes from a Clock so that schedules, timers and leases can be tested with a fake one.
 * Timestamps are stored and sent as ISO 8601 UTC with milliseconds; that text sorts in time order.
 */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/**
 * 9999-12-31T23:59:59.999Z, the last instant ISO 8601 writes with a four-digit year. A later one
 * is written `+010000-…`, which sorts before every other stored time: times that are stored and
 * compared as text (schedule ticks, `since` filters) must not pass it.
 */
export const LAST_ISO_INSTANT_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

export function iso(date: Date): string {
  return date.toISOString();
}

export function nowIso(clock: Clock): string {
  return clock.now().toISOString();
}

export function addMs(isoTime: string, ms: number): string {
  return new Date(Date.parse(isoTime) + ms).toISOString();
}

/** A clock tests can move by hand. */
export class ManualClock implements Clock {
  private current: number;
  constructor(start: Date | string = new Date()) {
    this.current = new Date(start).getTime();
  }
  now(): Date {
    return new Date(this.current);
  }
  set(to: Date | string): void {
    this.current = new Date(to).getTime();
  }
  advance(ms: number): void {
    this.current += ms;
  }
}
