/**
 * Wake-ups between processes on PostgreSQL (LISTEN/NOTIFY on `carepath_runs`). In one process,
 * WorkSignals wakes the local worker; with several processes, a run created in one must wake
 * workers in the others without waiting for their next poll. Polling stays the safety net:
 * a notification is only a hint, and a lost one costs at most a poll interval.
 *
 * SQLite has one process by rule, so there this does nothing.
 */
import pg from 'pg';
import { sql } from 'kysely';
import type { Container } from '../container.js';

export const RUNS_CHANNEL = 'carepath_runs';

export interface StoreSignals {
  close(): Promise<void>;
}

/**
 * Forwards this process's `runs` signals to the store (one NOTIFY per turn of the event loop),
 * and, with `onRemoteWake`, listens for other processes' notifications. Local echoes of our own
 * notifications only cost one extra claim attempt.
 */
export async function startStoreSignals(container: Container, onRemoteWake?: () => void): Promise<StoreSignals> {
  if (container.store.dialect !== 'postgres') return { close: async () => {} };
  let pending = false;
  const forward = () => {
    if (pending) return;
    pending = true;
    setImmediate(() => {
      pending = false;
      sql`select pg_notify(${RUNS_CHANNEL}, '')`.execute(container.db).catch((error: Error) =>
        container.logger.warn({ err: { message: error.message } }, 'could not notify other processes of new runs'),
      );
    });
  };
  const unsubscribe = container.signals.on('runs', forward);
  const listener = onRemoteWake ? await listen(container, onRemoteWake) : null;
  return {
    async close() {
      unsubscribe();
      await listener?.close();
    },
  };
}

/** A dedicated connection that LISTENs, reconnecting after a loss (with a pause). */
async function listen(container: Container, onWake: () => void): Promise<{ close(): Promise<void> }> {
  let closed = false;
  let client: pg.Client | null = null;
  let retry: NodeJS.Timeout | null = null;
  const connect = async () => {
    const next = new pg.Client({ connectionString: container.config.databaseUrl });
    next.on('notification', () => onWake());
    next.on('error', () => {
      if (closed) return;
      client = null;
      next.end().catch(() => undefined);
      retry = setTimeout(() => void connect().catch(() => undefined), 1_000);
    });
    await next.connect();
    await next.query(`listen ${RUNS_CHANNEL}`);
    if (closed) await next.end();
    else client = next;
    // Runs may have been created while we were not listening.
    onWake();
  };
  await connect();
  return {
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      await client?.end().catch(() => undefined);
    },
  };
}
