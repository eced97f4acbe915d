/**
 * An answer that says a write was stored (a fire's 201, a delivery's 202, a create, a PATCH, a
 * run's cancel) leaves only once the write survives a power cut. On SQLite a commit is durable
 * against the process dying when it returns, but sits in the operating system's cache until
 * the WAL is flushed: the answer waits for that flush (storage/sqlite-wal-sync.ts), one flush
 * shared by every answer that arrives meanwhile. A read waits only when it recorded an audit
 * event (a search of patients, a run's step timeline, an errored run's message): health data
 * is handed out once the record of who read it would survive a power cut too. Other reads do
 * not wait (a search sent by POST included: its route's scope is `…:read`), and neither do
 * refusals, which stored nothing. On PostgreSQL a commit is on disk when it returns, and
 * nothing is added.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Store } from '../../storage/connect.js';
import { wroteAuditEvent } from '../../modules/audit/audit.repository.js';

export function answerWritesOnceDurable(app: FastifyInstance, store: Pick<Store, 'syncCommits'>): void {
  const syncCommits = store.syncCommits;
  if (!syncCommits) return;
  app.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode >= 400) return payload;
    if (isRead(request) && !(request.ctx && wroteAuditEvent(request.ctx))) return payload;
    await syncCommits();
    return payload;
  });
}

function isRead(request: FastifyRequest): boolean {
  return request.method === 'GET' || request.method === 'HEAD' || request.routeOptions.config.scope?.endsWith(':read') === true;
}
