import { sql } from 'kysely';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { loggableError } from '../../lib/store-errors.js';

/** One line per this many milliseconds at most while the store stays unreachable: an orchestrator asks every few seconds. */
const UNREADY_LOG_EVERY_MS = 30_000;

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
      await sql`select 1`.execute(container.db);
    } catch (error) {
      const now = Date.now();
      unreadySince ??= now;
      if (now - lastSaid >= UNREADY_LOG_EVERY_MS) {
        lastSaid = now;
        container.logger.warn({ err: loggableError(error), unreadyForSeconds: Math.round((now - unreadySince) / 1000) }, 'not ready: the store does not answer');
      }
      return reply.code(503).send({ status: 'unavailable' });
    }
    if (unreadySince !== null) {
      container.logger.info({ unreadyForSeconds: Math.round((Date.now() - unreadySince) / 1000) }, 'ready again: the store answers');
      unreadySince = null;
      lastSaid = 0;
    }
    return { status: 'ready' };
  });
}
