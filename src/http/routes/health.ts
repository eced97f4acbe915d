import { sql } from 'kysely';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { loggableError } from '../../lib/store-errors.js';

/** One line per this many milliseconds at most while the store stays unreachable: an orchestrator asks every few seconds. */
const UNREADY_LOG_EVERY_MS = 30_000;

/**
 * A store that does not answer within this is not ready. A database that froze (no answer, no
 * refusal) held each probe for the pool's 10 s connection wait: a probe with a 1–5 s timeout
 * saw a timeout, not the 503 that says why.
 */
const READY_CHECK_MS = 3_000;

class ReadyCheckTimeout extends Error {
  readonly code = 'ETIMEDOUT';
  constructor() {
    super(`the store did not answer within ${READY_CHECK_MS / 1000} s`);
    this.name = 'ReadyCheckTimeout';
  }
}

function withinMs<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new ReadyCheckTimeout()), ms);
  });
  // The statement goes on when it is late; its answer (or failure) is dropped.
  work.catch(() => undefined);
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * Liveness and readiness for load balancers and orchestrators; no key needed, nothing revealed
 * in the answer. Why a process is not ready goes to its log (a warning, at most every 30 s, with
 * the store error's type and code), and back to ready is said once: `/readyz` went 503 without a
 * word, and the engineer paged for it had to guess (an observability review, 2026-11-27).
 */
export function registerHealthRoutes(app: Api, container: Container): void {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  let unreadySince: number | null = null;
  let lastSaid = 0;
  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    try {
      await withinMs(sql`select 1`.execute(container.db), READY_CHECK_MS);
    } catch (error) {
      const now = Date.now();
      unreadySince ??= now;
      if (now - lastSaid >= UNREADY_LOG_EVERY_MS) {
        lastSaid = now;
        container.logger.warn({ err: loggableError(error), unreadyForSeconds: Math.round((now - unreadySince) / 1000) }, 'not ready: the store does not answer');
      }
      return reply.code(503).header('retry-after', '1').send({ status: 'unavailable' });
    }
    if (unreadySince !== null) {
      container.logger.info({ unreadyForSeconds: Math.round((Date.now() - unreadySince) / 1000) }, 'ready again: the store answers');
      unreadySince = null;
      lastSaid = 0;
    }
    return { status: 'ready' };
  });
}
