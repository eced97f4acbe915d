/**
 * Is this machine's clock in step with the database's? Processes sharing a PostgreSQL database
 * agree on time through their own clocks: leases, timers, schedule ticks and every stored time
 * are written by the clock of the process that writes them. A machine whose clock runs ahead
 * takes over leases before they end (fenced: nothing is written twice, but an `http` call may be
 * repeated, with its idempotency key) and fires timers and ticks early; one behind fires them
 * late. NTP keeps machines within milliseconds; this catches a machine where it stopped.
 *
 * The reading compares this process's clock with PostgreSQL's `clock_timestamp()` at the middle
 * of the round trip; half the round trip is how far off the reading itself may be. SQLite has
 * one process on one machine: nothing to compare.
 */
import { sql } from 'kysely';
import type { Db } from './database.js';
import { dialectOfDb } from './dialect.js';
import type { Logger } from '../lib/logger.js';

export interface ClockSkew {
  /** This clock minus the database's, in ms: positive when this machine is ahead. */
  aheadMs: number;
  /** Half the round trip: the reading is right to within this. */
  withinMs: number;
}

/** Beyond this (after the reading's own uncertainty) a process says so: leases, timers and ticks assume agreement. */
export const SKEW_WARNING_MS = 1_000;

/** `now` is this machine's clock (tests pass one that is off). */
export async function measureClockSkew(db: Db, now: () => number = Date.now): Promise<ClockSkew | null> {
  if (dialectOfDb(db) !== 'postgres') return null;
  const sent = now();
  const { rows } = await sql<{ ms: number | string }>`select extract(epoch from clock_timestamp()) * 1000 as ms`.execute(db);
  const received = now();
  const databaseMs = Number(rows[0].ms);
  return { aheadMs: (sent + received) / 2 - databaseMs, withinMs: (received - sent) / 2 };
}

/** A clock that may be out of step, worded for the log; null when within SKEW_WARNING_MS. */
export function skewWarning(skew: ClockSkew): string | null {
  if (Math.abs(skew.aheadMs) - skew.withinMs <= SKEW_WARNING_MS) return null;
  const seconds = (Math.abs(skew.aheadMs) / 1000).toFixed(1);
  return (
    `this machine's clock is ${seconds} s ${skew.aheadMs > 0 ? 'ahead of' : 'behind'} the database's: ` +
    'leases, timers and schedules assume the clocks of all carepath machines agree; sync this one (NTP)'
  );
}

/**
 * Reads the skew at start and every `everyMs`, and logs a warning each time it is too large.
 * A failed reading is skipped (the store being away is reported elsewhere). Answers a stop.
 */
export function watchClockSkew(db: Db, logger: Logger, options: { everyMs?: number; now?: () => number } = {}): () => void {
  if (dialectOfDb(db) !== 'postgres') return () => undefined;
  const check = () =>
    void measureClockSkew(db, options.now)
      .then((skew) => {
        const warning = skew && skewWarning(skew);
        if (warning) logger.warn({ component: 'clock', aheadMs: Math.round(skew.aheadMs) }, warning);
      })
      .catch(() => undefined);
  check();
  const timer = setInterval(check, options.everyMs ?? 60_000);
  timer.unref();
  return () => clearInterval(timer);
}
