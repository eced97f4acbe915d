import { sql } from 'kysely';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';

/** Liveness and readiness for load balancers and orchestrators; no key needed, nothing revealed. */
export function registerHealthRoutes(app: Api, container: Container): void {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    try {
      await sql`select 1`.execute(container.db);
      return { status: 'ready' };
    } catch {
      return reply.code(503).send({ status: 'unavailable' });
    }
  });
}
