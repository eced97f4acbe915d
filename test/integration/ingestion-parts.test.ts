import { expect, it } from 'vitest';
import { describeEachStore, type TestWorkspace } from '../helpers/test-env.js';
import { bundle, createEndpoint, deliver, eventTrigger, processorFor, runsOf, search, type Endpoint, type Resource } from '../helpers/deliveries.js';
import { getRun, testWorker } from '../helpers/engine-harness.js';
import { capturedLogger } from '../helpers/log-capture.js';
import { admissionToDischarge } from '../helpers/deliveries.js';
import { refuseStateOf } from '../helpers/refused-states.js';

/**
 * A delivery with more items than one transaction takes is applied in parts, each in its own
 * transaction (modules/deliveries/delivery-parts.ts). Its outcome must be that of applying it
 * whole, and a failure (or a dead process) between parts must neither apply an item twice nor
 * skip one. Parts of 10 here; 1,000 in the service.
 */
const PART = 10;

describeEachStore('a delivery applied in parts', (env) => {
  const encounter = (id: string, status: string, patientId = 'parts-p'): Resource => ({
    resourceType: 'Encounter',
    id,
    status,
    class: { code: 'AMB' },
    subject: { reference: `Patient/${patientId}` },
  });

  async function listed(ws: TestWorkspace, endpoint: Endpoint) {
    const res = await ws.call('GET', `/v1/webhooks/${endpoint.webhookId}/deliveries?limit=1`);
    expect(res.statusCode, res.body).toBe(200);
    return res.json().data[0] as { deliveryId: string; status: string; events: unknown; runsStarted: number; skippedCount: number; error: string | null };
  }

  const audits = (ws: TestWorkspace, deliveryId: string) =>
    env.db
      .selectFrom('audit_events')
      .select('details')
      .where('workspace_id', '=', ws.workspaceId)
      .where('action', '=', 'delivery.process')
      .where('resource_id', '=', deliveryId)
      .execute()
      .then((rows) => rows.map((row) => JSON.parse(row.details) as { items: { from: number; to: number; of: number }; resources: Record<string, number>; runsStarted: number; skipped: number }));

  /** The resource ids of the runs a trigger started, from their payloads. */
  const runResources = async (triggerId: string) =>
    (await env.db.selectFrom('runs').select('payload').where('trigger_id', '=', triggerId).execute()).map((row) => JSON.parse(row.payload!).resource.id as string).sort();

  const progressRows = () => env.db.selectFrom('delivery_progress').selectAll().execute();

  it('gives the outcome of one transaction: every event once, in order, runs once each, one audit event per part', async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    const finished = await eventTrigger(ws, 'Encounter.finished');
    // 26 items: the patient, 22 planned encounters, then (in the third part) the first three of
    // them finished, which sees the states the first part wrote; an entry FHIR refuses is skipped.
    const resources: Resource[] = [
      { resourceType: 'Patient', id: 'parts-p', name: [{ family: 'Parts' }], meta: { tag: [{ code: 'first' }] } },
      ...Array.from({ length: 22 }, (_, i) => encounter(`pe-${i}`, 'planned')),
      { resourceType: 'Encounter', id: 'refused', status: 'no-such-status', class: { code: 'AMB' } },
      ...[0, 1, 2].map((i) => encounter(`pe-${i}`, 'finished')),
    ];
    expect((await deliver(env, endpoint, bundle(resources), { key: 'parts-1' })).statusCode).toBe(202);
    await processorFor(env, { transactionItems: PART }).drain();

    const delivery = await listed(ws, endpoint);
    expect(delivery).toMatchObject({
      status: 'processed',
      skippedCount: 1,
      runsStarted: 3,
      events: [
        { event: 'Encounter.created', count: 22 },
        { event: 'Encounter.finished', count: 3 },
        { event: 'Encounter.planned', count: 22 },
        { event: 'Encounter.updated', count: 3 },
        { event: 'Patient.created', count: 1 },
      ],
    });
    expect(await runResources(finished.triggerId)).toEqual(['pe-0', 'pe-1', 'pe-2']);
    expect((await search(ws, 'Patient')).results.map((hit) => [hit.extId, hit.tags])).toEqual([['parts-p', ['first']]]);
    const states = await env.db.selectFrom('resource_states').select(['resource_id', 'status']).where('workspace_id', '=', ws.workspaceId).where('resource_type', '=', 'Encounter').execute();
    expect(states).toHaveLength(22);
    expect(states.filter((s) => s.status === 'finished').map((s) => s.resource_id).sort()).toEqual(['pe-0', 'pe-1', 'pe-2']);

    // 26 items (the refused entry is not one): parts of 10, 10 and 6, each audited with what it covered.
    const audited = (await audits(ws, delivery.deliveryId)).sort((a, b) => a.items.from - b.items.from);
    expect(audited.map((a) => a.items)).toEqual([
      { from: 0, to: 10, of: 26 },
      { from: 10, to: 20, of: 26 },
      { from: 20, to: 26, of: 26 },
    ]);
    expect(audited.map((a) => [a.resources, a.runsStarted, a.skipped])).toEqual([
      [{ Patient: 1, Encounter: 9 }, 0, 0],
      [{ Encounter: 10 }, 0, 0],
      [{ Encounter: 6 }, 3, 1],
    ]);
    expect(await progressRows()).toEqual([]);
  });

  it('a part that fails leaves the parts before it applied; the retry goes on after them, and applies nothing twice', async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    const created = await eventTrigger(ws, 'Encounter.created');
    // The store refuses a resource of the second part.
    const cure = await refuseStateOf(env, 'poison-part');
    const resources = [
      ...Array.from({ length: 14 }, (_, i) => encounter(`pf-${i}`, 'planned', 'parts-q')),
      encounter('poison-part', 'planned', 'parts-q'),
      ...Array.from({ length: 10 }, (_, i) => encounter(`pf-${14 + i}`, 'planned', 'parts-q')),
    ];
    expect((await deliver(env, endpoint, bundle(resources), { key: 'parts-2' })).statusCode).toBe(202);
    const processor = processorFor(env, { transactionItems: PART });
    expect(await processor.processBatch()).toBe(1);

    const halfway = await listed(ws, endpoint);
    expect(halfway.status).toBe('processing');
    expect(halfway.error).toMatch(/^processing failed \(.*\); the first 10 of its items are applied, and the next try goes on after them$/);
    // What is applied so far shows.
    expect(halfway).toMatchObject({ runsStarted: 10, events: [{ event: 'Encounter.created', count: 10 }, { event: 'Encounter.planned', count: 10 }] });
    expect(await runsOf(ws, `triggerId=${created.triggerId}`)).toHaveLength(10);
    const [progress] = await progressRows();
    expect(progress).toMatchObject({ delivery_id: halfway.deliveryId, applied_items: 10, runs_started: 10 });

    await cure();
    // The retry's time has come.
    await env.db.updateTable('deliveries').set({ lease_expires_at: '2000-01-01T00:00:00.000Z' }).where('id', '=', halfway.deliveryId).execute();
    await processor.drain();

    const delivery = await listed(ws, endpoint);
    expect(delivery).toMatchObject({ status: 'processed', error: null, runsStarted: 25, events: [{ event: 'Encounter.created', count: 25 }, { event: 'Encounter.planned', count: 25 }] });
    const runs = await runResources(created.triggerId);
    expect(runs).toHaveLength(25);
    expect(new Set(runs).size).toBe(25);
    // One audit event per part committed: the failed try wrote none.
    expect((await audits(ws, delivery.deliveryId)).map((a) => a.items).sort((a, b) => a.from - b.from)).toEqual([
      { from: 0, to: 10, of: 25 },
      { from: 10, to: 20, of: 25 },
      { from: 20, to: 25, of: 25 },
    ]);
    expect(await progressRows()).toEqual([]);
  });

  async function waitingRuns(ws: TestWorkspace, endpoint: Endpoint, stays: string[]) {
    const blueprint = await ws.importBlueprint(admissionToDischarge());
    const admitted = await ws.call('POST', '/v1/triggers', { body: { name: 'Admitted', sourceId: blueprint.id, type: 'event', event: 'Encounter.in-progress' } });
    expect(admitted.statusCode).toBe(201);
    expect((await deliver(env, endpoint, bundle(stays.map((stay) => encounter(stay, 'in-progress', `w-${stay}`))))).statusCode).toBe(202);
    await processorFor(env, { transactionItems: PART }).drain();
    await testWorker(env).drain();
    const bySubject = new Map<string, string>();
    for (const row of await env.db.selectFrom('runs').select(['id', 'payload']).where('trigger_id', '=', admitted.json().triggerId).execute()) {
      bySubject.set(JSON.parse(row.payload!).resource.id, row.id);
    }
    expect(bySubject.size).toBe(stays.length);
    return bySubject;
  }

  const filler = (from: number, count = 10) => Array.from({ length: count }, (_, i) => encounter(`fill-${from + i}`, 'planned', 'wfill'));

  it("wakes the runs waiting for a part's events once that part commits, and those of a part whose wakes were not handed over with the next", async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    const runs = await waitingRuns(ws, endpoint, ['stay-a', 'stay-b']);
    const status = async (stay: string) => (await getRun(ws, runs.get(stay)!)).automationStatus;
    // stay-a's discharge in the first part; the second part fails (its first item refused), and
    // stay-b's discharge is in the third.
    const cure = await refuseStateOf(env, 'fill-9');
    const resources = [encounter('stay-a', 'finished', 'w-stay-a'), ...filler(0, 19), encounter('stay-b', 'finished', 'w-stay-b')];
    expect((await deliver(env, endpoint, bundle(resources))).statusCode).toBe(202);
    const processor = processorFor(env, { transactionItems: PART });
    await processor.processBatch();
    const worker = testWorker(env);
    await worker.drain();
    expect(await status('stay-a')).toBe('completed');
    expect(await status('stay-b')).toBe('running');
    // Handed over: nothing left pending in the progress.
    expect((await progressRows()).map((row) => [row.applied_items, row.pending_wakes])).toEqual([[10, null]]);

    await cure();
    await env.db.updateTable('deliveries').set({ lease_expires_at: '2000-01-01T00:00:00.000Z' }).where('status', '=', 'processing').execute();
    await processor.drain();
    await worker.drain();
    expect(await status('stay-b')).toBe('completed');
    expect(await progressRows()).toEqual([]);
  });

  it('hands over the wakes left in the progress of a delivery that an earlier version finished, and removes it', async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    const runs = await waitingRuns(ws, endpoint, ['stay-c']);
    // A part applied by this version, its wakes never handed over (its process died), then the
    // delivery applied whole by an earlier version's processor, which knows nothing of parts.
    expect((await deliver(env, endpoint, bundle([encounter('stay-c', 'finished', 'w-stay-c'), ...filler(100, 15)]))).statusCode).toBe(202);
    const delivery = await env.db.selectFrom('deliveries').select('id').where('webhook_id', '=', endpoint.webhookId).orderBy('id', 'desc').executeTakeFirstOrThrow();
    const subject = await env.db.selectFrom('runs').select('subject_record_id').where('id', '=', runs.get('stay-c')!).executeTakeFirstOrThrow();
    const wake = {
      subjectRecordId: subject.subject_record_id!,
      event: 'Encounter.finished',
      raisedAt: new Date().toISOString(),
      eventPayload: { event: 'Encounter.finished', resource: { resourceType: 'Encounter', id: 'stay-c', status: 'finished' }, deliveryId: delivery.id },
    };
    await env.db.updateTable('deliveries').set({ status: 'processed', body: null, lease_owner: null, lease_expires_at: null }).where('id', '=', delivery.id).execute();
    await env.db
      .insertInto('delivery_progress')
      .values({ delivery_id: delivery.id, applied_items: 10, events: '[]', runs_started: 0, pending_wakes: JSON.stringify([wake]), updated_at: new Date().toISOString() })
      .execute();

    const { logger, lines } = capturedLogger('info');
    await processorFor(env, {}, logger).sweep();
    await testWorker(env).drain();
    expect((await getRun(ws, runs.get('stay-c')!)).automationStatus).toBe('completed');
    expect(await progressRows()).toEqual([]);
    expect(lines.filter((line) => line.deliveryId === delivery.id).map((line) => [line.msg, line.wakes])).toEqual([
      ['handed over the wakes of a delivery an earlier version finished, and removed its progress', 1],
    ]);
  });
});
