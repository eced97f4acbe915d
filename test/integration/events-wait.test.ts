import { expect, it } from 'vitest';
import pg from 'pg';
import { describeEachStore } from '../helpers/test-env.js';
import { admissionToDischarge, createEndpoint, deliverAndProcess, lastDelivery } from '../helpers/deliveries.js';
import { getRun, getSteps, testWorker } from '../helpers/engine-harness.js';
import { sweepPendingWakes, type PendingWake } from '../../src/modules/deliveries/event-wake.js';
import { wakeRunsWaitingFor } from '../../src/engine/event-waits.js';

const encounter = (id: string, status: string, patientId: string) => ({
  resourceType: 'Encounter',
  id,
  status,
  class: { code: 'IMP' },
  subject: { reference: `Patient/${patientId}` },
});

describeEachStore('events reach runs waiting for them', (env) => {
  it('an admission starts a pathway that waits for the discharge; the discharge delivery wakes it', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const imported = await ws.importBlueprint(admissionToDischarge());
    const trigger = await ws.call('POST', '/v1/triggers', { body: { name: 'Admitted', sourceId: imported.id, type: 'event', event: 'Encounter.in-progress' } });
    expect(trigger.statusCode).toBe(201);

    await deliverAndProcess(env, feed, encounter('stay-1', 'in-progress', 'w1'));
    const [run] = await env.db.selectFrom('runs').select('id').where('trigger_id', '=', trigger.json().triggerId).execute();
    const worker = testWorker(env);
    await worker.drain();
    expect((await getRun(ws, run.id)).automationStatus).toBe('running');

    // Another patient's discharge, and another event of this patient, wake nothing.
    await deliverAndProcess(env, feed, encounter('stay-2', 'finished', 'w2'));
    await deliverAndProcess(env, feed, encounter('stay-1', 'onleave', 'w1'));
    await worker.drain();
    expect((await getRun(ws, run.id)).automationStatus).toBe('running');

    await deliverAndProcess(env, feed, encounter('stay-1', 'finished', 'w1'), { key: 'discharge' });
    const delivery = await lastDelivery(ws, feed);
    const stored = await env.db.selectFrom('deliveries').select(['pending_wakes', 'lease_owner']).where('id', '=', delivery.deliveryId).executeTakeFirstOrThrow();
    expect(stored).toEqual({ pending_wakes: null, lease_owner: null });
    await worker.drain();
    expect((await getRun(ws, run.id)).automationStatus).toBe('completed');
    const [step] = await getSteps(ws, run.id);
    expect(step).toMatchObject({
      outcome: 'event',
      output: { event: 'Encounter.finished', payload: { event: 'Encounter.finished', deliveryId: delivery.deliveryId, resource: { id: 'stay-1', status: 'finished' } } },
    });
  });

  it('an event and a cancel of the same waiting run at once: the cancel answers 200 and the run ends canceled', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const imported = await ws.importBlueprint(admissionToDischarge());
    const trigger = await ws.call('POST', '/v1/triggers', { body: { name: 'Admitted', sourceId: imported.id, type: 'event', event: 'Encounter.in-progress' } });
    await deliverAndProcess(env, feed, encounter('stay-race', 'in-progress', 'race'));
    await testWorker(env).drain();
    const run = await env.db.selectFrom('runs').select(['id', 'subject_record_id']).where('trigger_id', '=', trigger.json().triggerId).executeTakeFirstOrThrow();
    const wake = () =>
      wakeRunsWaitingFor(env.db, { workspaceId: ws.workspaceId, subjectRecordId: run.subject_record_id!, event: 'Encounter.finished', eventPayload: {}, at: new Date().toISOString() });
    if (env.kind === 'sqlite') {
      // One write transaction at a time: nothing to interleave.
      const [, cancel] = await Promise.all([wake(), ws.call('POST', `/v1/runs/${run.id}/cancel`)]);
      expect(cancel.statusCode).toBe(200);
    } else {
      // The interleaving a review met under load, made certain: the wake queues for the run's
      // wait row while another transaction holds it, the cancel comes next. The wake used to take
      // the wait, then want the run the cancel held, while the cancel wanted the wait: a
      // deadlock, and the cancel answered 503 while the run went on.
      const holder = new pg.Client({ connectionString: env.container.config.databaseUrl, options: `-c search_path=${env.schema}` });
      await holder.connect();
      try {
        await holder.query('begin');
        await holder.query('select 1 from run_event_waits where run_id = $1 for update', [run.id]);
        const woken = wake().then(() => 'woken', (error: unknown) => error);
        await new Promise((resolve) => setTimeout(resolve, 200));
        const canceled = ws.call('POST', `/v1/runs/${run.id}/cancel`);
        await new Promise((resolve) => setTimeout(resolve, 200));
        await holder.query('commit');
        expect(await woken).toBe('woken');
        expect((await canceled).statusCode).toBe(200);
      } finally {
        await holder.end();
      }
    }
    expect((await getRun(ws, run.id)).automationStatus).toBe('canceled');
  });

  it('a wake left behind by a crash reaches only the waits begun before its event, and carries the time it was raised', async () => {
    // Handed on a minute later by another process, it woke a run that began waiting after the
    // event, and told the run it had happened then (a durability review).
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const imported = await ws.importBlueprint(admissionToDischarge());
    const trigger = await ws.call('POST', '/v1/triggers', { body: { name: 'Admitted', sourceId: imported.id, type: 'event', event: 'Encounter.in-progress' } });
    const runsOfTrigger = async () => (await env.db.selectFrom('runs').select('id').where('trigger_id', '=', trigger.json().triggerId).orderBy('id').execute()).map((r) => r.id);
    const worker = testWorker(env);
    await deliverAndProcess(env, feed, encounter('late-1', 'in-progress', 'late-p'));
    await worker.drain();
    const [before] = await runsOfTrigger();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const raisedAt = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await deliverAndProcess(env, feed, encounter('late-2', 'in-progress', 'late-p'));
    await worker.drain();
    const after = (await runsOfTrigger()).find((id) => id !== before)!;
    expect((await getRun(ws, after)).automationStatus).toBe('running');

    // The discharge's wake as a dead process left it: stored on its processed delivery, lease run out.
    const subject = await env.db.selectFrom('records').select('id').where('workspace_id', '=', ws.workspaceId).where('ext_id', '=', 'late-p').executeTakeFirstOrThrow();
    const carrier = await lastDelivery(ws, feed);
    const wake: PendingWake = { subjectRecordId: subject.id, event: 'Encounter.finished', raisedAt, eventPayload: { event: 'Encounter.finished', resource: { id: 'late-1' }, deliveryId: carrier.deliveryId } };
    await env.db
      .updateTable('deliveries')
      .set({ pending_wakes: JSON.stringify([wake]), lease_owner: 'a-dead-process', lease_expires_at: new Date(Date.now() - 1_000).toISOString() })
      .where('id', '=', carrier.deliveryId)
      .execute();
    expect(await sweepPendingWakes(env.db, env.kind, 'sweeper', new Date(), 60_000)).toBe(1);
    await worker.drain();
    expect((await getRun(ws, before)).automationStatus).toBe('completed');
    expect((await getSteps(ws, before))[0]).toMatchObject({ outcome: 'event', output: { event: 'Encounter.finished', at: raisedAt } });
    expect((await getRun(ws, after)).automationStatus).toBe('running');
  });

  it('PostgreSQL: a wait held up in its commit while a delivery about its patient is applied still sees that delivery', async () => {
    // The wait's time was taken when its step was planned, before its transaction: a wait that
    // began first by that time but committed after the delivery had looked for waits lost its
    // event, and the run waited for its timeout (a scale-out review: 12 and 19 of 200 runs under
    // load). Here the wait row's insert is held up (another transaction inserts the same key and
    // rolls back) while the discharge is delivered: the two must be ordered one way or the other,
    // and since the wait began first, the discharge wakes it.
    if (env.kind !== 'postgres') return; // SQLite: one writer, nothing to interleave
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const imported = await ws.importBlueprint(admissionToDischarge());
    const trigger = await ws.call('POST', '/v1/triggers', { body: { name: 'Admitted', sourceId: imported.id, type: 'event', event: 'Encounter.in-progress' } });
    await deliverAndProcess(env, feed, encounter('held-1', 'in-progress', 'held-p'));
    const run = await env.db.selectFrom('runs').select(['id', 'subject_record_id']).where('trigger_id', '=', trigger.json().triggerId).executeTakeFirstOrThrow();

    const holder = new pg.Client({ connectionString: env.container.config.databaseUrl, options: `-c search_path=${env.schema}` });
    await holder.connect();
    const worker = testWorker(env);
    try {
      await holder.query('begin');
      await holder.query(
        `insert into run_event_waits (run_id, node_id, automation_id, workspace_id, subject_record_id, event, started_at)
         values ($1, 'wait', 'discharge', $2, $3, 'Encounter.finished', '2000-01-01T00:00:00.000Z')`,
        [run.id, ws.workspaceId, run.subject_record_id],
      );
      const drained = worker.drain();
      await new Promise((resolve) => setTimeout(resolve, 150));
      const delivered = deliverAndProcess(env, feed, encounter('held-1', 'finished', 'held-p'));
      await new Promise((resolve) => setTimeout(resolve, 150));
      await holder.query('rollback');
      await Promise.all([drained, delivered]);
    } finally {
      await holder.end();
    }
    await worker.drain();
    expect((await getRun(ws, run.id)).automationStatus).toBe('completed');
    expect((await getSteps(ws, run.id))[0]).toMatchObject({ outcome: 'event', output: { payload: { resource: { id: 'held-1', status: 'finished' } } } });
  });
});
