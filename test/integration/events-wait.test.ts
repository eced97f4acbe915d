import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { createEndpoint, deliverAndProcess, lastDelivery } from '../helpers/deliveries.js';
import { getRun, getSteps, testWorker } from '../helpers/engine-harness.js';
import { validateBlueprint } from '../../src/modules/blueprints/blueprint.validate.js';

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
    const blueprint = validateBlueprint({
      name: 'Admission to discharge',
      nodes: [
        { id: 'start', kind: 'start' },
        { id: 'wait', kind: 'action', automations: [{ id: 'discharge', type: 'wait_for_event', with: { event: 'Encounter.finished', timeout: 'P30D' } }] },
        { id: 'done', kind: 'end' },
      ],
      links: [
        { from: 'start', to: 'wait' },
        { from: 'wait', to: 'done' },
      ],
    });
    const imported = await ws.importBlueprint(blueprint as unknown as Record<string, unknown>);
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
});
