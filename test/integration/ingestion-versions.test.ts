import { expect, it } from 'vitest';
import { describeEachStore, type TestWorkspace } from '../helpers/test-env.js';
import { createEndpoint, deliver, deliverAndProcess, eventTrigger, lastDelivery, nowSeconds, processorFor, runsOf, search, type Endpoint } from '../helpers/deliveries.js';

/**
 * Feeds do not arrive in order: a late delivery of an older version of a resource must not put
 * back older data or raise older statuses again, and a DELETE of what is not stored raises
 * nothing (resource-version.ts, resource-changes.ts).
 */
const at = (day: number) => `2024-05-${String(day).padStart(2, '0')}T08:00:00.000+02:00`;

const patient = (id: string, version: number, family: string, tag: string) => ({
  resourceType: 'Patient',
  id,
  meta: { versionId: String(version), lastUpdated: at(version), tag: [{ code: tag }] },
  name: [{ given: ['Ann'], family }],
});
const encounter = (id: string, version: number, status: string) => ({
  resourceType: 'Encounter',
  id,
  meta: { versionId: String(version), lastUpdated: at(version) },
  status,
  class: { code: 'IMP' },
  subject: { reference: 'Patient/pv-1' },
});
const put = (resource: { resourceType: string; id: string }) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
const history = (...entries: object[]) => ({ resourceType: 'Bundle', type: 'history', entry: entries });
const deletion = (type: string, id: string) => ({ resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: `${type}/${id}` } }] });

describeEachStore('resource versions and deletions from feeds out of order', (env) => {
  let second = 0;
  /** Each delivery signed a second apart: the same body at the same second is a replay. */
  const send = (ws: TestWorkspace, feed: Endpoint, body: unknown, key?: string) =>
    deliverAndProcess(env, feed, body, { t: nowSeconds(env.container) + ++second, ...(key ? { key } : {}) });

  it('a late older Patient is skipped and listed: no event, no run, search keeps the newer name and tags', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const updated = await eventTrigger(ws, 'Patient.updated');
    await send(ws, feed, patient('pv-1', 1, 'First', 'v1tag'));
    await send(ws, feed, patient('pv-1', 3, 'Newest', 'v3tag'));
    expect(await runsOf(ws, `triggerId=${updated.triggerId}`)).toHaveLength(1);

    await send(ws, feed, { resourceType: 'Bundle', type: 'collection', entry: [{ resource: patient('pv-1', 2, 'Middle', 'v2tag') }] });
    const late = await lastDelivery(ws, feed);
    expect(late).toMatchObject({
      status: 'processed',
      events: [],
      runsStarted: 0,
      skippedCount: 1,
      skipped: [{ index: 0, message: 'Patient not applied: a newer version of it is stored (its meta.lastUpdated or meta.versionId is older)' }],
    });
    expect(await runsOf(ws, `triggerId=${updated.triggerId}`)).toHaveLength(1);
    expect((await search(ws, 'Patient')).results.map((hit) => [hit.extId, hit.name, hit.tags])).toEqual([['pv-1', 'Ann Newest', ['v3tag']]]);
    const audit = await env.db.selectFrom('audit_events').select('details').where('workspace_id', '=', ws.workspaceId).where('action', '=', 'delivery.process').where('resource_id', '=', late.deliveryId).executeTakeFirstOrThrow();
    expect(JSON.parse(audit.details)).toMatchObject({ skipped: 1, runsStarted: 0 });

    // A newer one after it is applied as usual.
    await send(ws, feed, patient('pv-1', 4, 'Latest', 'v4tag'));
    expect((await lastDelivery(ws, feed)).events).toEqual([{ event: 'Patient.updated', count: 1 }]);
    expect((await search(ws, 'Patient')).results.map((hit) => [hit.name, hit.tags])).toEqual([['Ann Latest', ['v4tag']]]);
  });

  it('a late in-progress after finished raises nothing, and finished sent again starts no second run', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const finished = await eventTrigger(ws, 'Encounter.finished');
    const inProgress = await eventTrigger(ws, 'Encounter.in-progress');
    await send(ws, feed, encounter('ev-1', 1, 'planned'));
    await send(ws, feed, encounter('ev-1', 3, 'finished'));
    await send(ws, feed, encounter('ev-1', 2, 'in-progress'));
    expect((await lastDelivery(ws, feed)).events).toEqual([]);
    await send(ws, feed, encounter('ev-1', 3, 'finished'));
    expect((await lastDelivery(ws, feed)).events).toEqual([]);
    expect(await runsOf(ws, `triggerId=${finished.triggerId}`)).toHaveLength(1);
    expect(await runsOf(ws, `triggerId=${inProgress.triggerId}`)).toHaveLength(0);
    const state = await env.db.selectFrom('resource_states').select(['status', 'version_id', 'last_updated']).where('workspace_id', '=', ws.workspaceId).where('resource_id', '=', 'ev-1').executeTakeFirstOrThrow();
    expect(state).toEqual({ status: 'finished', version_id: '3', last_updated: '2024-05-03T06:00:00.000000000Z' });
  });

  it('a history bundle replayed raises nothing again; in either order its newest version stays', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const newestFirst = history(put(encounter('eh-1', 3, 'finished')), put(encounter('eh-1', 2, 'in-progress')), put(encounter('eh-1', 1, 'planned')));
    await send(ws, feed, newestFirst, 'history-1');
    expect((await lastDelivery(ws, feed)).events).toEqual([
      { event: 'Encounter.created', count: 1 },
      { event: 'Encounter.finished', count: 1 },
      { event: 'Encounter.in-progress', count: 1 },
      { event: 'Encounter.planned', count: 1 },
      { event: 'Encounter.updated', count: 2 },
    ]);
    // Sent again under a new key: the two older versions are skipped, the newest is unchanged.
    await send(ws, feed, newestFirst, 'history-2');
    expect(await lastDelivery(ws, feed)).toMatchObject({ events: [], skippedCount: 2 });

    // Listed oldest first (against FHIR's order): applied in reverse, the newest comes first and
    // the older ones after it are skipped; what stays is the newest.
    const oldestFirst = history(put(encounter('eh-2', 1, 'planned')), put(encounter('eh-2', 2, 'in-progress')), put(encounter('eh-2', 3, 'finished')));
    await send(ws, feed, oldestFirst, 'history-3');
    expect(await lastDelivery(ws, feed)).toMatchObject({
      events: [
        { event: 'Encounter.created', count: 1 },
        { event: 'Encounter.finished', count: 1 },
      ],
      skippedCount: 2,
    });
    const state = await env.db.selectFrom('resource_states').select('status').where('workspace_id', '=', ws.workspaceId).where('resource_id', '=', 'eh-2').executeTakeFirstOrThrow();
    expect(state.status).toBe('finished');
  });

  it('a history page replayed late does not delete a newer version, nor raise its older statuses', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const deleted = await eventTrigger(ws, 'Encounter.deleted');
    await send(ws, feed, history(put(encounter('eo-1', 3, 'in-progress'))));
    // The older page: the deletion that made v2 (newest first), and v1.
    const olderPage = history(
      { request: { method: 'DELETE', url: 'Encounter/eo-1' }, response: { status: '204', lastModified: at(2), etag: 'W/"2"' } },
      put(encounter('eo-1', 1, 'planned')),
    );
    await send(ws, feed, olderPage);
    expect(await lastDelivery(ws, feed)).toMatchObject({ events: [], skippedCount: 2 });
    expect(await runsOf(ws, `triggerId=${deleted.triggerId}`)).toHaveLength(0);
    const state = await env.db.selectFrom('resource_states').select(['status', 'version_id']).where('workspace_id', '=', ws.workspaceId).where('resource_id', '=', 'eo-1').executeTakeFirstOrThrow();
    expect(state).toEqual({ status: 'in-progress', version_id: '3' });
  });

  it('a DELETE raises deleted once: not again, and not for what was never delivered', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const deleted = await eventTrigger(ws, 'Observation.deleted');
    const observation = { resourceType: 'Observation', id: 'od-1', status: 'final', code: { text: 'HbA1c' }, subject: { reference: 'Patient/pd-1' } };
    await send(ws, feed, observation);
    await send(ws, feed, deletion('Observation', 'od-1'));
    expect((await lastDelivery(ws, feed)).events).toEqual([{ event: 'Observation.deleted', count: 1 }]);
    await send(ws, feed, deletion('Observation', 'od-1'));
    expect((await lastDelivery(ws, feed)).events).toEqual([]);
    await send(ws, feed, deletion('Observation', 'never-sent'));
    expect(await lastDelivery(ws, feed)).toMatchObject({ status: 'processed', events: [], skippedCount: 0 });
    const runs = await runsOf(ws, `triggerId=${deleted.triggerId}`);
    expect(runs).toHaveLength(1);
  });

  it('a resource deleted and then delivered late (the version deleted, or older) stays deleted; a newer version makes it again', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const created = await eventTrigger(ws, 'Patient.created');
    await send(ws, feed, patient('pt-1', 2, 'Entered', 'in-error'));
    await send(ws, feed, deletion('Patient', 'pt-1'));
    expect((await search(ws, 'Patient')).results).toEqual([]);
    // A sender's retry of the create, after the deletion went through.
    await send(ws, feed, { resourceType: 'Bundle', type: 'collection', entry: [{ resource: patient('pt-1', 2, 'Entered', 'in-error') }] });
    expect(await lastDelivery(ws, feed)).toMatchObject({
      status: 'processed',
      events: [],
      runsStarted: 0,
      skipped: [{ index: 0, message: 'Patient not applied: it was deleted, and this is the version deleted or an older one (its meta.lastUpdated or meta.versionId)' }],
    });
    await send(ws, feed, patient('pt-1', 1, 'Older', 'in-error'));
    expect((await lastDelivery(ws, feed)).skippedCount).toBe(1);
    expect((await search(ws, 'Patient')).results).toEqual([]);
    expect(await runsOf(ws, `triggerId=${created.triggerId}`)).toHaveLength(1);
    const tombstone = await env.db.selectFrom('resource_states').select(['deleted', 'version_id', 'status', 'patient_id', 'source_tags']).where('workspace_id', '=', ws.workspaceId).where('resource_id', '=', 'pt-1').executeTakeFirstOrThrow();
    expect({ ...tombstone, deleted: Number(tombstone.deleted) }).toEqual({ deleted: 1, version_id: '2', status: null, patient_id: null, source_tags: null });

    // Made again, with a newer version: created as any new resource, searchable again.
    await send(ws, feed, patient('pt-1', 3, 'Again', 'readmitted'));
    expect((await lastDelivery(ws, feed)).events).toEqual([{ event: 'Patient.created', count: 1 }]);
    expect((await search(ws, 'Patient')).results.map((hit) => [hit.extId, hit.name, hit.tags])).toEqual([['pt-1', 'Ann Again', ['readmitted']]]);
    expect(await runsOf(ws, `triggerId=${created.triggerId}`)).toHaveLength(2);
  });

  it('a deleted Patient is not made again as a stand-in by a retried bundle whose other resources name it', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const observation = { resourceType: 'Observation', id: 'od-9', meta: { versionId: '1', lastUpdated: at(1) }, status: 'final', code: { text: 'HbA1c' }, subject: { reference: 'Patient/pd-9' } };
    const original = { resourceType: 'Bundle', type: 'transaction', entry: [put(patient('pd-9', 1, 'Deleted', 'diabetes')), put(observation)] };
    await send(ws, feed, original);
    await send(ws, feed, deletion('Patient', 'pd-9'));
    await send(ws, feed, original);
    expect((await lastDelivery(ws, feed)).skippedCount).toBe(1);
    expect((await search(ws, 'Patient')).results).toEqual([]);
  });

  it('a Patient deleted without a version gets no stand-in from a later part of the same delivery that names it', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    await send(ws, feed, { resourceType: 'Patient', id: 'pp-1', name: [{ family: 'Unversioned' }] });
    const observation = (n: number, subject: string) => ({ resourceType: 'Observation', id: `op-${n}`, status: 'final', code: { text: 'HbA1c' }, subject: { reference: subject } });
    const entries = [
      { request: { method: 'DELETE', url: 'Patient/pp-1' } },
      ...Array.from({ length: 6 }, (_, n) => put(observation(n, 'Patient/someone-else'))),
      put(observation(9, 'Patient/pp-1')),
    ];
    // Parts of 5 items: the deletion in the first, the Observation naming the patient in the second.
    const res = await deliver(env, feed, { resourceType: 'Bundle', type: 'transaction', entry: entries }, { t: nowSeconds(env.container) + ++second });
    expect(res.statusCode).toBe(202);
    await processorFor(env, { transactionItems: 5 }).drain();
    const audited = await env.db.selectFrom('audit_events').select('details').where('workspace_id', '=', ws.workspaceId).where('action', '=', 'delivery.process').execute();
    expect(audited.filter((event) => JSON.parse(event.details).items !== undefined)).toHaveLength(2);
    expect((await search(ws, 'Patient')).results.map((hit) => hit.extId)).toEqual(['someone-else']);
  });

  it('a deletion whose version cannot be ordered against the stored one keeps both: the version deleted stays deleted', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const created = await eventTrigger(ws, 'Observation.created');
    // Stored with meta.lastUpdated only; deleted by a history entry that gives only an etag.
    const observation = { resourceType: 'Observation', id: 'ou-1', meta: { lastUpdated: at(2) }, status: 'final', code: { text: 'HbA1c' }, subject: { reference: 'Patient/pu-1' } };
    await send(ws, feed, observation);
    await send(ws, feed, history({ request: { method: 'DELETE', url: 'Observation/ou-1' }, response: { status: '204', etag: 'W/"2"' } }));
    await send(ws, feed, observation);
    expect(await lastDelivery(ws, feed)).toMatchObject({ events: [], skippedCount: 1 });
    expect(await runsOf(ws, `triggerId=${created.triggerId}`)).toHaveLength(1);
  });

  it('takes a tombstone an older version wrote content over (a rolling deploy) for the resource stored: its DELETE raises deleted', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const deleted = await eventTrigger(ws, 'Observation.deleted');
    const observation = { resourceType: 'Observation', id: 'om-1', meta: { versionId: '1', lastUpdated: at(1) }, status: 'final', code: { text: 'HbA1c' }, subject: { reference: 'Patient/pm-1' } };
    await send(ws, feed, observation);
    await send(ws, feed, deletion('Observation', 'om-1'));
    // What a worker before migration 0019 does with a late copy: its upsert knows no `deleted` column.
    await env.db
      .updateTable('resource_states')
      .set({ status: 'final', patient_id: 'pm-1', content_hash: 'written-by-an-older-worker' })
      .where('workspace_id', '=', ws.workspaceId)
      .where('resource_id', '=', 'om-1')
      .execute();
    await send(ws, feed, deletion('Observation', 'om-1'));
    expect((await lastDelivery(ws, feed)).events).toEqual([{ event: 'Observation.deleted', count: 1 }]);
    expect(await runsOf(ws, `triggerId=${deleted.triggerId}`)).toHaveLength(2);
  });

  it('a delivery applied in parts lists the older versions every part skipped', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const ids = Array.from({ length: 12 }, (_, i) => `ep-${i}`);
    await send(ws, feed, { resourceType: 'Bundle', type: 'collection', entry: ids.map((id) => ({ resource: encounter(id, 2, 'finished') })) });
    // Items 0–11 in parts of 5: the older versions at 1, 6 and 11 fall in each of the three parts.
    const mixed = ids.map((id, i) => ({ resource: encounter(id, i % 5 === 1 ? 1 : 3, 'finished') }));
    const res = await deliver(env, feed, { resourceType: 'Bundle', type: 'collection', entry: mixed }, { t: nowSeconds(env.container) + ++second });
    expect(res.statusCode, res.body).toBe(202);
    await processorFor(env, { transactionItems: 5 }).drain();
    const delivery = await lastDelivery(ws, feed);
    expect(delivery).toMatchObject({ status: 'processed', skippedCount: 3, events: [{ event: 'Encounter.updated', count: 9 }] });
    expect(delivery.skipped.map((s: { index: number }) => s.index)).toEqual([1, 6, 11]);
    expect(await env.db.selectFrom('delivery_progress').selectAll().execute()).toEqual([]);
  });
});
