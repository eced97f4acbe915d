/**
 * An answer that says a write was stored (a fire's 201, a delivery's 202, a create, a PATCH, a
 * run's cancel) leaves only once the write survives a power cut. On SQLite a commit is durable
 * against the process dying when it returns, but sits in the operating system's cache until
 * the WAL is flushed: the answer waits for that flush (storage/sqlite-wal-sync.ts), one flush
 * shared by every answer that arrives meanwhile. Reads do not wait, a search sent by POST
 * included (a route whose scope is `…:read`): a read's audit event reaches the disk with the
 * next answer's flush or the checkpointer's next pass, usually within 100 ms; waiting for it
 * doubled the search's latency (docs/decisions.md). Neither do refusals, which stored nothing.
 * On PostgreSQL a commit is on disk when it returns, and nothing is added.
 */
import type { FastifyInstance } from 'fastify';
import type { Store } from '../../storage/connect.js';

export function answerWritesOnceDurable(app: FastifyInstance, store: Pick<Store, 'syncCommits'>): void {
  const syncCommits = store.syncCommits;
  if (!syncCommits) return;
  app.addHook('onSend', async (request, reply, payload) => {
    if (request.method === 'GET' || request.method === 'HEAD' || reply.statusCode >= 400) return payload;
    if (request.routeOptions.config.scope?.endsWith(':read')) return payload;
    await syncCommits();
    return payload;
  });
}
