/**
 * A PATCH decides on the row as it is when it writes, held in its transaction: not on the row
 * as read before it (a review, 2026-11-28). Each race is made to happen: the DELETE (or the
 * other PATCH) commits right after the PATCH's first read of the row.
 */
import { expect, it } from 'vitest';
import type { KyselyPlugin, QueryId } from 'kysely';
import { describeEachStore, type TestEnv } from '../helpers/test-env.js';
import { savedQuery } from '../helpers/deliveries.js';
import { systemContext } from '../../src/auth/context.js';
import { changeWebhook, deleteWebhook } from '../../src/modules/webhooks/webhook.service.js';
import { changeQuery, deleteQuery } from '../../src/modules/queries/query.service.js';
import type { Db } from '../../src/storage/database.js';

/** The store, with `meanwhile` run once, right after the first read of `table` comes back. */
function afterFirstRead(env: TestEnv, table: string, meanwhile: () => Promise<unknown>): Db {
  const reads = new Set<QueryId>();
  let done = false;
  const plugin: KyselyPlugin = {
    transformQuery: (args) => {
      const node = args.node as { kind?: string; from?: { froms?: { table?: { identifier?: { name?: string } } }[] } };
      if (node.kind === 'SelectQueryNode' && node.from?.froms?.[0]?.table?.identifier?.name === table) reads.add(args.queryId);
      return args.node;
    },
    transformResult: async (args) => {
      if (reads.has(args.queryId) && !done) {
        done = true;
        await meanwhile();
      }
      return args.result;
    },
  };
  return env.db.withPlugin(plugin);
}

describeEachStore('PATCH racing a DELETE', (env) => {
  // SQLite's one connection is held until a result is read, so nothing can be run in between
  // from here (it would wait for itself); there, the PATCH's transaction and the DELETE's are
  // serialized whole, and the read inside the transaction is what sees the DELETE.
  const onPostgres = it.runIf(env.kind === 'postgres');

  onPostgres('of a webhook endpoint: 404, and the deleted endpoint is not turned active again', async () => {
    const ws = await env.workspace();
    const created = (await ws.call('POST', '/v1/webhooks', { body: { name: 'feed', active: false } })).json();
    const ctx = systemContext(ws.tenantId, ws.workspaceId, 'race');
    const db = afterFirstRead(env, 'webhooks', () => deleteWebhook(env.db, ctx, created.webhookId, new Date()));
    await expect(changeWebhook({ db, publicUrl: 'http://localhost' }, ctx, created.webhookId, { active: true }, new Date())).rejects.toMatchObject({ code: 'not_found' });
    const row = await env.db.selectFrom('webhooks').select(['active', 'deleted_at']).where('id', '=', created.webhookId).executeTakeFirstOrThrow();
    expect(Number(row.active)).toBe(0);
    expect(row.deleted_at).not.toBeNull();
    const audited = await env.db.selectFrom('audit_events').select('action').where('resource_id', '=', created.webhookId).orderBy('id').execute();
    expect(audited.map((event) => event.action)).toEqual(['webhook.create', 'webhook.delete']);
  });

  onPostgres('of a saved query: 404, not a 200 for a query that is gone', async () => {
    const ws = await env.workspace();
    const { queryId } = await savedQuery(ws, 'Patient', [{ op: 'with', tag: 'cohort' }]);
    const ctx = systemContext(ws.tenantId, ws.workspaceId, 'race');
    const db = afterFirstRead(env, 'queries', () => deleteQuery(env.db, ctx, queryId, new Date()));
    await expect(changeQuery(db, ctx, queryId, { name: 'renamed' }, new Date())).rejects.toMatchObject({ code: 'not_found' });
    const audited = await env.db.selectFrom('audit_events').select('action').where('resource_id', '=', queryId).orderBy('id').execute();
    expect(audited.map((event) => event.action)).toEqual(['query.create', 'query.delete']);
  });
});
