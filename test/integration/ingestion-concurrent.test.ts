/**
 * Deliveries about the same resources applied at the same time by several processors: on
 * PostgreSQL (several processes) each waits for the other's rows (resource-locks.ts), on SQLite
 * the one write lock orders them. Either way the resource's state, its search record and the
 * record's tags agree afterwards.
 */
import pg from 'pg';
import { expect, it } from 'vitest';
import { describeEachStore, type TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { createEndpoint, deliver, deliverAndProcess, processorFor, type Endpoint } from '../helpers/deliveries.js';
import { createContainer } from '../../src/container.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/lib/logger.js';
import { DeliveryProcessor } from '../../src/modules/deliveries/delivery-processor.js';
import { workerBasics } from '../../src/container.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const patient = (id: string, tag: string) => ({ resourceType: 'Patient', id, name: [{ family: `F ${id}` }], meta: { tag: [{ code: tag }] } });
const deletion = (id: string) => ({ resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: `Patient/${id}` } }] });

/** Per Patient id: whether it has a state and a record, and the record's tags; plus tag rows whose record is gone. */
async function stored(env: TestEnv, ws: TestWorkspace) {
  const states = await env.db.selectFrom('resource_states').select('resource_id').where('workspace_id', '=', ws.workspaceId).where('resource_type', '=', 'Patient').execute();
  const records = await env.db.selectFrom('records').select(['id', 'ext_id']).where('workspace_id', '=', ws.workspaceId).where('resource_type', '=', 'Patient').execute();
  const tags = await env.db.selectFrom('record_tags').select(['record_id', 'tag']).where('workspace_id', '=', ws.workspaceId).execute();
  const recordIds = new Set(records.map((r) => r.id));
  return {
    stateIds: states.map((s) => s.resource_id).sort(),
    recordIds: records.map((r) => r.ext_id).sort(),
    tagsOf: (extId: string) => tags.filter((t) => t.record_id === records.find((r) => r.ext_id === extId)?.id).map((t) => t.tag).sort(),
    orphanTags: tags.filter((t) => !recordIds.has(t.record_id)).length,
  };
}

async function deliveryStatus(env: TestEnv, endpoint: Endpoint): Promise<string> {
  const row = await env.db.selectFrom('deliveries').select('status').where('webhook_id', '=', endpoint.webhookId).orderBy('id', 'desc').executeTakeFirstOrThrow();
  return row.status;
}

describeEachStore('deliveries about the same resources, applied at once', (env) => {
  it('an update and a deletion of one Patient each see the other: state, record and tags agree (several processors)', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const ids = Array.from({ length: 30 }, (_, n) => `race-${n}`);
    await deliverAndProcess(env, feed, { resourceType: 'Bundle', type: 'collection', entry: ids.map((id) => ({ resource: patient(id, 'first') })) });
    // Each pair, an update and a deletion, is stored one after the other, and two processors
    // (on PostgreSQL in two containers, as two processes would be) claim one delivery at a time.
    for (const id of ids) {
      expect((await deliver(env, feed, patient(id, 'second'))).statusCode).toBe(202);
      expect((await deliver(env, feed, deletion(id))).statusCode).toBe(202);
    }
    const second =
      env.kind === 'postgres'
        ? await createContainer(loadConfig({ ...process.env, CAREPATH_DATABASE_URL: env.container.config.databaseUrl }), {
            storeOptions: { schema: env.schema, poolSize: 4 },
            logger: createLogger('silent'),
          })
        : env.container;
    try {
      const processors = [processorFor(env, { batch: 1 }), new DeliveryProcessor({ ...workerBasics(second), reader: second.deliveryReader }, { batch: 1 })];
      await Promise.all(processors.map((processor) => processor.drain()));
    } finally {
      if (second !== env.container) await second.close();
    }
    const after = await stored(env, ws);
    expect(after.orphanTags).toBe(0);
    // Whichever came last, a Patient has a state exactly when it has a record.
    expect(after.recordIds).toEqual(after.stateIds);
    for (const id of after.recordIds) expect(after.tagsOf(id)).toEqual(['second']);
  });

  it('PostgreSQL: a delivery waits while another transaction holds its resource, then applies over what it wrote', async () => {
    if (env.kind !== 'postgres') return;
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    await deliverAndProcess(env, feed, patient('held', 'first'));
    const recordId = (await env.db.selectFrom('records').select('id').where('workspace_id', '=', ws.workspaceId).where('ext_id', '=', 'held').executeTakeFirstOrThrow()).id;

    // Another processor is applying a deletion of the same Patient: it holds the state's row.
    const other = new pg.Client({ connectionString: env.container.config.databaseUrl });
    await other.connect();
    try {
      await other.query(`set search_path to ${env.schema}`);
      await other.query('begin');
      await other.query(`select 1 from resource_states where workspace_id = $1 and resource_type = 'Patient' and resource_id = 'held' for update`, [ws.workspaceId]);
      expect((await deliver(env, feed, patient('held', 'second'))).statusCode).toBe(202);
      const applying = processorFor(env).drain();
      await sleep(500);
      expect(await deliveryStatus(env, feed)).toBe('processing');
      // The deletion's writes, committed while the update waits.
      await other.query('delete from record_tags where record_id = $1', [recordId]);
      await other.query('delete from records where id = $1', [recordId]);
      await other.query(`delete from resource_states where workspace_id = $1 and resource_type = 'Patient' and resource_id = 'held'`, [ws.workspaceId]);
      await other.query('commit');
      await applying;
    } finally {
      await other.query('rollback').catch(() => undefined);
      await other.end();
    }
    expect(await deliveryStatus(env, feed)).toBe('processed');
    // The update came after the deletion: the Patient is back, as a new record with its tags.
    const after = await stored(env, ws);
    expect(after).toMatchObject({ stateIds: ['held'], recordIds: ['held'], orphanTags: 0 });
    expect(after.tagsOf('held')).toEqual(['second']);
  });
});
