/**
 * The long-running commands (`serve`, `api`, `worker`) wait for a PostgreSQL server that is not
 * up yet, instead of exiting at once: started together with the database (a compose file, a
 * machine booting, a maintenance window), they exited with "nothing listens there" and came up
 * only if something restarted them. They try again every 2 s for up to a minute, saying once
 * what they wait for and then every 10 s, and give up with the same sentence as before. A store
 * that refuses (a password, a database that does not exist) or a SQLite file is not waited for:
 * waiting would not help. `migrate` and `admin` never wait: an operator runs them by hand.
 */
import type { Logger } from 'pino';
import { StoreUnavailableError } from '../storage/store-unavailable.js';

export interface StoreWait {
  /** How long to keep trying, in all (default 60 s). */
  totalMs?: number;
  /** Pause between tries (default 2 s). */
  everyMs?: number;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}

const SAY_AGAIN_MS = 10_000;

export async function waitForStore<T>(open: () => Promise<T>, logger: Logger, options: StoreWait = {}): Promise<T> {
  const totalMs = options.totalMs ?? 60_000;
  const everyMs = options.everyMs ?? 2_000;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const now = options.now ?? Date.now;
  const started = now();
  let said: number | null = null;
  for (;;) {
    try {
      const opened = await open();
      if (said !== null) logger.info({ waitedMs: now() - started }, 'the store answers: starting');
      return opened;
    } catch (error) {
      const waited = now() - started;
      if (!(error instanceof StoreUnavailableError) || !error.mayPass || waited + everyMs > totalMs) throw error;
      if (said === null || now() - said >= SAY_AGAIN_MS) {
        said = now();
        // The sentence names the store without its password (store-unavailable.ts).
        logger.warn({ waitedMs: waited, giveUpAfterMs: totalMs }, `waiting for the store: ${error.message}`);
      }
      await sleep(everyMs);
    }
  }
}
