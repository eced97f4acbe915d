/**
 * The work waiting in the store, as gauges on `/metrics`, read when Prometheus scrapes: is the
 * service keeping up? Deliveries not yet processed and those that failed, runs due that no worker
 * holds (and how long the oldest has waited), runs being retried after failing unexpectedly, how
 * late the most overdue schedule tick is (a deployment of `api` processes only runs no
 * scheduler), and the search change log not yet folded.
 *
 * They describe the store, not the process: every process sharing a PostgreSQL database reports
 * the same figures. Each read walks an index that holds only the work in question (the claim
 * indexes of runs and deliveries, the index of failing runs), never a table's history; the
 * change log is counted up to LOG_COUNT_CAP rows. If the store does not answer, the gauges are
 * left out of that scrape rather than failing it (the HTTP and process metrics still matter then),
 * and `carepath_store_up` reads 0. Left out, not 0: a gauge reset to 0 read as a backlog drained
 * at the very moment of an outage, and cleared every alert on it (an on-call review, 2026-11-27).
 *
 * On PostgreSQL one gauge is of the process: `carepath_clock_ahead_seconds`, this machine's clock
 * against the database's (storage/clock-skew.ts).
 */
import { sql } from 'kysely';
import { Gauge, type Registry } from 'prom-client';
import type { Db } from '../../storage/database.js';
import type { Clock } from '../../lib/clock.js';
import { measureClockSkew } from '../../storage/clock-skew.js';
import { dialectOfDb } from '../../storage/dialect.js';

/**
 * Beyond this many rows the change log's backlog reads as this many: on SQLite a scrape's count
 * runs on the serving thread, and must stay a few milliseconds.
 */
export const LOG_COUNT_CAP = 100_000;

interface StoreWork {
  deliveriesWaiting: number;
  deliveriesFailed: number;
  runsDue: number;
  /** How long the oldest due run has waited, at the time of the read (0 when none is due). */
  oldestDueSeconds: number;
  /** Runs whose execution failed unexpectedly last time, waiting to be tried again. */
  runsFailing: number;
  tagChangesUnfolded: number;
  /** How late the most overdue schedule tick is (0 when none is due): no scheduler runs if it grows. */
  overdueTickSeconds: number;
}

async function readStoreWork(db: Db, at: Date): Promise<StoreWork> {
  const now = at.toISOString();
  const deliveries = await db
    .selectFrom('deliveries')
    .select((eb) => [
      eb.fn.countAll<number>().filterWhere('status', 'in', ['received', 'processing']).as('waiting'),
      eb.fn.countAll<number>().filterWhere('status', '=', 'failed').as('failed'),
    ])
    .where('status', 'in', ['received', 'processing', 'failed'])
    .executeTakeFirstOrThrow();
  const runs = await db
    .selectFrom('runs')
    .select((eb) => [eb.fn.countAll<number>().as('due'), eb.fn.min('available_at').as('oldest')])
    // Literal statuses, so the planner uses the partial index runs_claimable.
    .where(sql<boolean>`automation_status in ('scheduled', 'running')`)
    .where('available_at', '<=', now)
    .executeTakeFirstOrThrow();
  const failing = await db
    .selectFrom('runs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    // A literal predicate, so the planner uses the partial index runs_failing (only those runs).
    .where(sql<boolean>`failures > 0`)
    .where('automation_status', 'in', ['scheduled', 'running'])
    .executeTakeFirstOrThrow();
  const ticks = await db
    .selectFrom('triggers')
    .select((eb) => eb.fn.min('next_run_at').as('oldest'))
    .where('next_run_at', '<=', now)
    .where('active', '=', 1)
    .where('deleted_at', 'is', null)
    .executeTakeFirstOrThrow();
  const log = await sql<{ n: number | string }>`select count(*) as n from (select 1 from record_tag_changes limit ${LOG_COUNT_CAP}) as backlog`.execute(db);
  return {
    deliveriesWaiting: Number(deliveries.waiting),
    deliveriesFailed: Number(deliveries.failed),
    runsDue: Number(runs.due),
    oldestDueSeconds: secondsSince(runs.oldest, at),
    runsFailing: Number(failing.n),
    tagChangesUnfolded: Number(log.rows[0]?.n ?? 0),
    overdueTickSeconds: secondsSince(ticks.oldest, at),
  };
}

/** Seconds from a stored time to `at` (0 for none, or one still ahead). */
function secondsSince(time: string | null | undefined, at: Date): number {
  return time ? Math.max(0, (at.getTime() - Date.parse(time)) / 1000) : 0;
}

export function registerStoreGauges(registry: Registry, db: Db, clock: Clock): void {
  // One read serves every gauge of a scrape: prom-client collects the gauges one after the other.
  let pending: { at: number; work: Promise<StoreWork | null> } | null = null;
  const work = (): Promise<StoreWork | null> => {
    const at = Date.now();
    if (!pending || at - pending.at > 1_000) pending = { at, work: readStoreWork(db, clock.now()).catch(() => null) };
    return pending.work;
  };
  const gauge = (name: string, help: string, read: (work: StoreWork) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const found = await work();
        // remove(), with no labels, drops the one series: the scrape has no sample of it.
        if (found) this.set(read(found));
        else this.remove();
      },
    });
  new Gauge({
    name: 'carepath_store_up',
    help: 'Whether the store answered the reads behind the store gauges of this scrape (1) or not (0: they are left out)',
    registers: [registry],
    async collect() {
      this.set((await work()) ? 1 : 0);
    },
  });
  gauge('carepath_deliveries_waiting', 'Deliveries received and not yet processed (received or processing)', (w) => w.deliveriesWaiting);
  gauge('carepath_deliveries_failed', 'Deliveries whose processing failed for good', (w) => w.deliveriesFailed);
  gauge('carepath_runs_due', 'Runs due (scheduled, or running with a timer due or a lease run out) that no worker holds', (w) => w.runsDue);
  gauge('carepath_runs_due_oldest_seconds', 'How long the oldest due run has waited for a worker, in seconds (0 when none)', (w) => w.oldestDueSeconds);
  gauge(
    'carepath_runs_failing',
    'Runs whose execution failed unexpectedly (a store error, a bug) and that wait to be tried again, later after each failure in a row; the log says why',
    (w) => w.runsFailing,
  );
  gauge(
    'carepath_schedule_tick_overdue_seconds',
    'How late the most overdue search-trigger tick is, in seconds (0 when none is due; a scheduler looks every second, so a growing value means none runs)',
    (w) => w.overdueTickSeconds,
  );
  gauge('carepath_tag_changes_unfolded', `Search change-log rows not yet folded into bitmaps (counted up to ${LOG_COUNT_CAP})`, (w) => w.tagChangesUnfolded);
  // Of this process, not the store: whether its machine's clock agrees with the database's.
  if (dialectOfDb(db) === 'postgres') {
    new Gauge({
      name: 'carepath_clock_ahead_seconds',
      help: "This machine's clock minus the database's, in seconds (leases, timers and schedules assume they agree)",
      registers: [registry],
      async collect() {
        const skew = await measureClockSkew(db).catch(() => null);
        if (skew) this.set(skew.aheadMs / 1000);
        else this.remove();
      },
    });
  }
}
