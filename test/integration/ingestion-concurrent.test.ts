/**
 * Deliveries about the same resources applied at the same time by several processors: on
 * PostgreSQL (several processes) each waits for the other's rows (resource-locks.ts), on SQLite
 * the one write lock orders them. Either way the resource's state, its search record and the
 * record's tags agree afterwards.
 */
import pg from 'pg';
import { expect, it } from 'vitest';
import { describeEachStore, type TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { createEndpoint, deliver, deliverAndProcess, eventTrigger, processorFor, type Endpoint } from '../helpers/deliveries.js';
import { createContainer } from '../../src/container.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/lib/logger.js';
import { DeliveryProcessor } from '../../src/modules/deliveries/delivery-processor.js';
import { workerBasics } from '../../src/container.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const patient = (id: string, tag: string) => ({ resourceType: 'Patient', id, name: [{ family: `F ${id}` }], meta: { tag: [{ code: tag }] } });
const deletion = (id: string) => ({ resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: `Patient/${id}` } }] });

/** Per Patient id: whether it has a live state and a record, and the record's tags; plus tag rows whose record is gone. */
async function stored(env: TestEnv, ws: TestWorkspace) {
  // Live states: a deleted Patient's tombstone (migration 0019) is no state of a stored resource.
  const states = await env.db.selectFrom('resource_states').select('resource_id').where('workspace_id', '=', ws.workspaceId).where('resource_type', '=', 'Patient').where('deleted', '=', 0).execute();
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

/**
 * Processes what is waiting with two processors at once, each claiming one delivery at a time: on
 * PostgreSQL in two containers, as two processes would be; on SQLite in the one container.
 */
async function drainWithTwoProcessors(env: TestEnv): Promise<void> {
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
}

describeEachStore('deliveries about the same resources, applied at once', (env) => {
  it('an update and a deletion of one Patient each see the other: state, record and tags agree (several processors)', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const ids = Array.from({ length: 30 }, (_, n) => `race-${n}`);
    await deliverAndProcess(env, feed, { resourceType: 'Bundle', type: 'collection', entry: ids.map((id) => ({ resource: patient(id, 'first') })) });
    // Each pair, an update and a deletion, is stored one after the other; two processors apply them.
    for (const id of ids) {
      expect((await deliver(env, feed, patient(id, 'second'))).statusCode).toBe(202);
      expect((await deliver(env, feed, deletion(id))).statusCode).toBe(202);
    }
    await drainWithTwoProcessors(env);
    const after = await stored(env, ws);
    expect(after.orphanTags).toBe(0);
    // Whichever came last, a Patient has a state exactly when it has a record.
    expect(after.recordIds).toEqual(after.stateIds);
    for (const id of after.recordIds) expect(after.tagsOf(id)).toEqual(['second']);
  });

  it('two deliveries creating the same new resources at once: one raises created, the other updated (several processors)', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const trigger = await eventTrigger(ws, 'Patient.created');
    const ids = Array.from({ length: 60 }, (_, n) => `twice-${n}`);
    for (const tag of ['first', 'second']) {
      expect((await deliver(env, feed, { resourceType: 'Bundle', type: 'collection', entry: ids.map((id) => ({ resource: patient(id, tag) })) })).statusCode).toBe(202);
    }
    await drainWithTwoProcessors(env);
    // Every Patient was created once: one run each, whichever delivery came first.
    const runs = await env.db.selectFrom('runs').select('id').where('trigger_id', '=', trigger.triggerId).execute();
    expect(runs).toHaveLength(ids.length);
    const events = await env.db.selectFrom('deliveries').select('events').where('webhook_id', '=', feed.webhookId).execute();
    const raised = events.flatMap((row) => JSON.parse(row.events ?? '[]') as { event: string; count: number }[]);
    expect(raised.filter((e) => e.event === 'Patient.created').reduce((sum, e) => sum + e.count, 0)).toBe(ids.length);
    expect(raised.filter((e) => e.event === 'Patient.updated').reduce((sum, e) => sum + e.count, 0)).toBe(ids.length);
    expect((await stored(env, ws)).recordIds).toHaveLength(ids.length);
  });

  it('PostgreSQL: a delivery of a new resource waits while another processor creates it, then updates it', async () => {
    if (env.kind !== 'postgres') return;
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    // Validation compiled first, so that the delivery below is applied at once, not seconds later.
    await deliverAndProcess(env, feed, patient('warm-up', 'first'));
    const created = await eventTrigger(ws, 'Patient.created');
    const other = new pg.Client({ connectionString: env.container.config.databaseUrl });
    await other.connect();
    try {
      // Another processor is creating Patient/fresh: it holds the key's bucket (as resource-locks.ts
      // takes it) and has written the state and the record, not yet committed.
      await other.query(`set search_path to ${env.schema}`);
      await other.query('begin');
      await other.query(`select pg_advisory_xact_lock(${0x63706e72}, hashtext($1 || '/Patient/fresh') & 1023)`, [ws.workspaceId]);
      await other.query(
        `insert into resource_states (workspace_id, resource_type, resource_id, status, patient_id, source_tags, delivery_id, updated_at)
         values ($1, 'Patient', 'fresh', null, 'fresh', '["first"]', 'other', $2)`,
        [ws.workspaceId, new Date().toISOString()],
      );
      expect((await deliver(env, feed, patient('fresh', 'second'))).statusCode).toBe(202);
      const applying = processorFor(env).drain();
      await sleep(500);
      expect(await deliveryStatus(env, feed)).toBe('processing');
      await other.query('commit');
      await applying;
    } finally {
      await other.query('rollback').catch(() => undefined);
      await other.end();
    }
    // It found the Patient the other one created: updated, not created a second time.
    const row = await env.db.selectFrom('deliveries').select('events').where('webhook_id', '=', feed.webhookId).orderBy('id', 'desc').executeTakeFirstOrThrow();
    expect(JSON.parse(row.events)).toEqual([{ event: 'Patient.updated', count: 1 }]);
    expect(await env.db.selectFrom('runs').select('id').where('trigger_id', '=', created.triggerId).execute()).toEqual([]);
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
