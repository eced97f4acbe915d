/**
 * Wake-ups between processes on PostgreSQL (LISTEN/NOTIFY on `carepath_runs`). In one process,
 * WorkSignals wakes the local worker; with several processes, a run created in one must wake
 * workers in the others without waiting for their next poll. Polling stays the safety net:
 * a notification is only a hint, and a lost one costs at most a poll interval.
 *
 * Each process keeps one connection of its own for this, outside the pool: it LISTENs (worker
 * processes) and sends the process's NOTIFYs. Sent through the pool, a NOTIFY waited for a free
 * connection behind the very transactions that created the runs, under load tens of
 * milliseconds of every run's fire-to-running time (docs/decisions.md).
 *
 * SQLite has one process by rule, so there this does nothing.
 */
import pg from 'pg';
import { sql } from 'kysely';
import type { Container } from '../container.js';
import { POSTGRES_CONNECTION_DEFAULTS } from '../storage/postgres-defaults.js';
import { loggableError } from '../lib/store-errors.js';

export const RUNS_CHANNEL = 'carepath_runs';

export interface StoreSignals {
  close(): Promise<void>;
}

/**
 * Forwards this process's `runs` signals to the store, and, with `onRemoteWake`, listens for
 * other processes' notifications. Local echoes of our own notifications only cost one extra
 * claim attempt.
 */
export async function startStoreSignals(container: Container, onRemoteWake?: () => void): Promise<StoreSignals> {
  if (container.store.dialect !== 'postgres') return { close: async () => {} };
  const connection = new SignalConnection(container, onRemoteWake);
  await connection.open();
  const unsubscribe = container.signals.on('runs', () => connection.notify());
  return {
    async close() {
      unsubscribe();
      await connection.close();
    },
  };
}

/** The process's own connection for LISTEN and NOTIFY, reconnecting after a loss (with a pause). */
class SignalConnection {
  private client: pg.Client | null = null;
  private closed = false;
  private retry: NodeJS.Timeout | null = null;
  /** A NOTIFY is on its way; signals meanwhile are folded into one more after it. */
  private sending = false;
  private again = false;

  constructor(
    private readonly container: Container,
    private readonly onWake?: () => void,
  ) {}

  async open(): Promise<void> {
    const next = new pg.Client({ connectionString: this.container.config.databaseUrl, ...POSTGRES_CONNECTION_DEFAULTS });
    if (this.onWake) next.on('notification', () => this.onWake?.());
    next.on('error', () => {
      if (this.closed) return;
      if (this.client === next) this.client = null;
      next.end().catch(() => undefined);
      this.retry = setTimeout(() => void this.open().catch(() => undefined), 1_000);
    });
    await next.connect();
    if (this.onWake) await next.query(`listen ${RUNS_CHANNEL}`);
    if (this.closed) {
      await next.end();
      return;
    }
    this.client = next;
    // Runs may have been created while we were not listening.
    this.onWake?.();
  }

  /**
   * One NOTIFY at a time: the first signal goes out at once, the ones that come while it is on
   * its way share the next. Without the connection (reconnecting) the pool sends it.
   */
  notify(): void {
    if (this.sending) {
      this.again = true;
      return;
    }
    this.sending = true;
    const client = this.client;
    const sent = client
      ? client.query('select pg_notify($1, $2)', [RUNS_CHANNEL, ''])
      : sql`select pg_notify(${RUNS_CHANNEL}, '')`.execute(this.container.db);
    sent
      .catch((error: Error) => {
        if (!this.closed) this.container.logger.warn({ err: loggableError(error) }, 'could not notify other processes of new runs');
      })
      .finally(() => {
        this.sending = false;
        if (this.again && !this.closed) {
          this.again = false;
          this.notify();
        }
      });
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    await this.client?.end().catch(() => undefined);
  }
}
