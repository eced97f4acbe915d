/**
 * The access report of a record (`recordId`: who touched this patient's data) and what a key did
 * (`keyId`): every event that names the record, through its index rows written with the event,
 * and only those; combined with each other and with `action` and `since`; paged newest first.
 * Migration 0021 indexes the events stored before it the same way.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { describeEachStore, simpleBlueprint, type TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { createEndpoint, deliverAndProcess } from '../helpers/deliveries.js';
import { chain, fire, patient as insertPatient, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { storesAtMigration } from '../helpers/store-at-migration.js';
import { uuidv7 } from '../../src/lib/ids.js';
import type { AuditEvent } from '../../src/modules/audit/audit.repository.js';

/** An event as the API answers it (its time as ISO text). */
type EventJson = AuditEvent;

async function list(ws: TestWorkspace, query: string, key?: string): Promise<EventJson[]> {
  const res = await ws.call('GET', `/v1/audit-events?${query}`, key === undefined ? {} : { key });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data;
}

/** Every event of the list, following `nextCursor`; the pages' sizes too. */
async function allPages(ws: TestWorkspace, query: string): Promise<{ events: EventJson[]; sizes: number[] }> {
  const events: EventJson[] = [];
  const sizes: number[] = [];
  let cursor: string | null = null;
  do {
    const res = await ws.call('GET', `/v1/audit-events?${query}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
    expect(res.statusCode, res.body).toBe(200);
    const page = res.json() as { data: EventJson[]; nextCursor: string | null };
    events.push(...page.data);
    sizes.push(page.data.length);
    cursor = page.nextCursor;
  } while (cursor !== null);
  return { events, sizes };
}

const patientResource = (id: string) => ({ resourceType: 'Patient', id, name: [{ given: ['Ada'], family: `Lovelace-${id}` }] });

async function recordOf(env: TestEnv, ws: TestWorkspace, extId: string): Promise<string> {
  const row = await env.db.selectFrom('records').select('id').where('workspace_id', '=', ws.workspaceId).where('ext_id', '=', extId).executeTakeFirstOrThrow();
  return row.id;
}

describeEachStore('audit events by record and by key', (env) => {
  it("lists every event that touched a record, and nothing else: its runs and their actions, reads, searches and deliveries", async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    await deliverAndProcess(env, feed, patientResource('mrn-ada'), { key: 'ada-1' });
    const ada = await recordOf(env, ws, 'mrn-ada');
    const bob = await insertPatient(env, ws, 'mrn-bob', ['flagged']);

    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const trigger = (await ws.call('POST', '/v1/triggers', { body: { name: 'Web', sourceId: blueprint.id, type: 'web', autoStart: false } })).json();
    const fire = async (extId: string) => {
      const res = await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: { payload: { subject: { reference: `Patient/${extId}` } } } });
      expect(res.statusCode, res.body).toBe(201);
      return res.json().runId as string;
    };
    const adaRun = await fire('mrn-ada');
    const bobRun = await fire('mrn-bob');
    for (const action of ['start', 'pause', 'resume', 'cancel']) {
      expect((await ws.call('POST', `/v1/runs/${adaRun}/${action}`)).statusCode).toBe(200);
    }
    expect((await ws.call('POST', `/v1/runs/${bobRun}/cancel`)).statusCode).toBe(200);
    expect((await ws.call('GET', `/v1/runs/${adaRun}/steps`)).statusCode).toBe(200);
    expect((await ws.call('GET', `/v1/runs/${bobRun}/steps`)).statusCode).toBe(200);
    // Found by both (twice: the second is a search asked again), by one (Bob only) and a count.
    const search = async (filters: { op: string; tag: string }[], limit = 10) => {
      const res = await ws.call('POST', '/v1/search', { body: { resourceType: 'Patient', filters, limit } });
      expect(res.statusCode, res.body).toBe(200);
      return res.json().results.map((hit: { id: string }) => hit.id) as string[];
    };
    expect((await search([])).sort()).toEqual([ada, bob].sort());
    expect((await search([])).sort()).toEqual([ada, bob].sort());
    expect(await search([{ op: 'with', tag: 'flagged' }])).toEqual([bob]);
    expect((await ws.call('POST', '/v1/search/count', { body: { resourceType: 'Patient', filters: [] } })).statusCode).toBe(200);

    const everything = await list(ws, 'limit=100');
    const names = (event: EventJson, record: string) =>
      event.resourceId === record ||
      event.details.subjectRecordId === record ||
      (Array.isArray(event.details.ids) && event.details.ids.includes(record)) ||
      (Array.isArray(event.details.patientRecordIds) && event.details.patientRecordIds.includes(record));
    const forAda = await list(ws, `recordId=${ada}&limit=100`);
    expect(forAda.map((event) => event.action)).toEqual([
      'search.execute',
      'search.execute',
      'run.steps.read',
      'run.cancel',
      'run.resume',
      'run.pause',
      'run.start',
      'run.create',
      'delivery.process',
    ]);
    expect(forAda).toEqual(everything.filter((event) => names(event, ada)));
    expect(forAda.filter((event) => event.action.startsWith('run.')).every((event) => event.resourceId === adaRun)).toBe(true);
    expect(forAda.filter((event) => event.action.startsWith('run.')).every((event) => event.details.subjectRecordId === ada)).toBe(true);

    const forBob = await list(ws, `recordId=${bob}&limit=100`);
    expect(forBob.map((event) => event.action)).toEqual([
      'search.execute',
      'search.execute',
      'search.execute',
      'run.steps.read',
      'run.cancel',
      'run.create',
    ]);
    expect(forBob).toEqual(everything.filter((event) => names(event, bob)));

    // A run's own Pathway record (the run's id) names the run's events.
    expect((await list(ws, `recordId=${adaRun}&limit=100`)).map((event) => event.action)).toEqual(
      forAda.filter((event) => event.action.startsWith('run.')).map((event) => event.action),
    );

    // Upper case is the same id, and the report now lists its own read above (audit.read);
    // a record nothing touched: an empty list.
    expect(await list(ws, `recordId=${ada.toUpperCase()}&limit=100`)).toEqual([
      expect.objectContaining({ action: 'audit.read', resourceId: ada, details: { filters: { recordId: ada }, cursor: false, count: forAda.length } }),
      ...forAda,
    ]);
    expect(await list(ws, `recordId=${uuidv7()}`)).toEqual([]);

    // Each search's index rows are exactly the ids it handed out, whichever way it was written.
    for (const event of everything.filter((e) => e.action === 'search.execute')) {
      const rows = await env.db.selectFrom('audit_event_records').select('record_id').where('event_id', '=', event.id).execute();
      expect(rows.map((row) => row.record_id).sort()).toEqual([...((event.details.ids as string[] | undefined) ?? [])].sort());
    }
  });

  it("finds a search of Pathway records by the patients of the runs it listed, and by the runs", async () => {
    const ws = await env.workspace();
    const ada = await insertPatient(env, ws, 'mrn-p-ada');
    const bob = await insertPatient(env, ws, 'mrn-p-bob');
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const trigger = (await ws.call('POST', '/v1/triggers', { body: { name: 'Web', sourceId: blueprint.id, type: 'web', autoStart: false } })).json();
    const fire = async (payload: object) => {
      const res = await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: { payload } });
      expect(res.statusCode, res.body).toBe(201);
      return res.json().runId as string;
    };
    const adaRuns = [await fire({ subject: { reference: 'Patient/mrn-p-ada' } }), await fire({ subject: { reference: 'Patient/mrn-p-ada' } })];
    const bare = await fire({});
    const searchPathways = async (limit: number, offset = 0) => {
      const res = await ws.call('POST', '/v1/search', { body: { resourceType: 'Pathway', filters: [], limit, offset } });
      expect(res.statusCode, res.body).toBe(200);
      return res.json().results.map((hit: { id: string }) => hit.id) as string[];
    };
    // Twice, so a search asked again (on PostgreSQL, the page's own statement) is covered too.
    for (let i = 0; i < 2; i++) expect((await searchPathways(10)).sort()).toEqual([...adaRuns, bare].sort());
    const searches = (await list(ws, 'action=search.execute&limit=100')).map((event) => event.id);
    expect(searches).toHaveLength(2);

    expect((await list(ws, `recordId=${ada}&action=search.execute`)).map((event) => event.id)).toEqual(searches);
    expect(await list(ws, `recordId=${bob}&action=search.execute`)).toEqual([]);
    expect((await list(ws, `recordId=${bare}&action=search.execute`)).map((event) => event.id)).toEqual(searches);
    for (const id of searches) {
      const rows = await env.db.selectFrom('audit_event_records').select('record_id').where('event_id', '=', id).execute();
      expect(rows.map((row) => row.record_id).sort()).toEqual([...adaRuns, bare, ada].sort()); // Ada once, for two runs
    }
    // A page without Ada's runs does not name her.
    const page = await searchPathways(1, 0);
    const last = (await list(ws, 'action=search.execute&limit=1'))[0];
    const named = await env.db.selectFrom('audit_event_records').select('record_id').where('event_id', '=', last.id).execute();
    expect(named.map((row) => row.record_id).sort()).toEqual(page[0] === bare ? [bare] : [page[0], ada].sort());
  });

  it("finds the engine's events of a run whose patient's record a delivery deleted, by that record", async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    await deliverAndProcess(env, feed, patientResource('mrn-gone'), { key: 'gone-1' });
    const gone = await recordOf(env, ws, 'mrn-gone');
    const { triggerId } = await webTriggerFor(ws, chain('After deletion', [
      { id: 'mark', automations: [{ id: 'path', type: 'tag', with: { target: 'pathway', add: ['needs-call'] } }] },
    ]));
    const runId = await fire(ws, triggerId, { subject: { reference: 'Patient/mrn-gone' } });
    await deliverAndProcess(env, feed, { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: 'Patient/mrn-gone' } }] }, { key: 'gone-2' });
    expect(await env.db.selectFrom('records').select('id').where('id', '=', gone).executeTakeFirst()).toBeUndefined();
    await testWorker(env).drain();

    const forGone = await list(ws, `recordId=${gone}&limit=100`);
    expect(forGone.map((event) => event.action)).toEqual(['record.tags.change', 'delivery.process', 'run.create', 'delivery.process']);
    expect(forGone[0]).toMatchObject({ resourceId: runId, details: { subjectRecordId: gone } });
  });

  it('lists what a key did, by itself and with a record, an action and a time', async () => {
    const ws = await env.workspace();
    const second = await ws.keyWith([]);
    const ada = await insertPatient(env, ws, 'mrn-k-ada');
    const bob = await insertPatient(env, ws, 'mrn-k-bob');
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const trigger = (await ws.call('POST', '/v1/triggers', { body: { name: 'Web', sourceId: blueprint.id, type: 'web', autoStart: false } })).json();
    const fire = async (extId: string, key: string) => {
      const res = await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { key, body: { payload: { subject: { reference: `Patient/${extId}` } } } });
      expect(res.statusCode, res.body).toBe(201);
      return res.json().runId as string;
    };
    const first = await fire('mrn-k-ada', ws.key);
    const other = await fire('mrn-k-ada', second.key);
    await fire('mrn-k-bob', second.key);
    expect((await ws.call('POST', `/v1/runs/${first}/cancel`, { key: second.key })).statusCode).toBe(200);
    expect((await ws.call('POST', `/v1/runs/${other}/pause`)).statusCode).toBe(200);
    expect((await ws.call('POST', '/v1/search', { key: second.key, body: { resourceType: 'Patient', filters: [], limit: 10 } })).statusCode).toBe(200);

    const everything = await list(ws, 'limit=100');
    const bySecond = await list(ws, `keyId=${second.keyId}&limit=100`);
    expect(bySecond.map((event) => event.action)).toEqual(['search.execute', 'run.cancel', 'run.create', 'run.create']);
    expect(bySecond).toEqual(everything.filter((event) => event.keyId === second.keyId));
    // The first key read the trail twice meanwhile (everything, then bySecond): audit.read, newest first.
    const byFirst = await list(ws, `keyId=${ws.keyId}&limit=100`);
    expect(byFirst.map((event) => event.action)).toEqual(['audit.read', 'audit.read', 'run.pause', 'run.create', 'trigger.create']);
    expect(byFirst.slice(0, 2).map((event) => event.details)).toEqual([
      { filters: { keyId: second.keyId }, cursor: false, count: bySecond.length },
      { filters: {}, cursor: false, count: everything.length },
    ]);
    expect(byFirst.slice(2)).toEqual(everything.filter((event) => event.keyId === ws.keyId));

    // Both filters: what the second key did to Ada's data.
    const secondOnAda = await list(ws, `keyId=${second.keyId}&recordId=${ada}&limit=100`);
    expect(secondOnAda.map((event) => [event.action, event.resourceId])).toEqual([
      ['search.execute', null],
      ['run.cancel', first],
      ['run.create', other],
    ]);
    expect((await list(ws, `keyId=${ws.keyId}&recordId=${bob}`)).map((event) => event.action)).toEqual([]);
    expect((await list(ws, `keyId=${second.keyId}&recordId=${bob}&action=run.create`)).map((event) => event.action)).toEqual(['run.create']);
    expect((await list(ws, `recordId=${ada}&action=run.pause`)).map((event) => event.resourceId)).toEqual([other]);
    expect((await list(ws, `keyId=${second.keyId}&action=run.cancel`)).map((event) => event.resourceId)).toEqual([first]);

    // `since` with either: exactly the events at or after it. Ada's list holds the first key's
    // reads of her events (audit.read), and every read of it adds one: the reads after
    // `adaEvents` are left out of the comparison (audit-read.test.ts checks them).
    const adaEvents = await list(ws, `recordId=${ada}&limit=100`);
    expect(adaEvents.filter((event) => event.action === 'audit.read').map((event) => event.details.filters)).toEqual([
      { recordId: ada, action: 'run.pause' },
      { recordId: ada, keyId: second.keyId },
    ]);
    const since = adaEvents[4].at;
    const asOfAdaEvents = (events: EventJson[]) => events.filter((event) => event.action !== 'audit.read' || event.id <= adaEvents[0].id);
    expect(asOfAdaEvents(await list(ws, `recordId=${ada}&since=${encodeURIComponent(since)}&limit=100`))).toEqual(adaEvents.filter((event) => event.at >= since));
    expect(await list(ws, `recordId=${ada}&keyId=${second.keyId}&since=${encodeURIComponent(since)}&limit=100`)).toEqual(
      secondOnAda.filter((event) => event.at >= since),
    );
    expect(await list(ws, `keyId=${second.keyId}&since=${encodeURIComponent(since)}&limit=100`)).toEqual(bySecond.filter((event) => event.at >= since));
    expect(await list(ws, `recordId=${ada}&since=2999-01-01T00:00:00Z`)).toEqual([]);
  });

  it('pages a filtered list newest first, two at a time, with the filters sent again', async () => {
    const ws = await env.workspace();
    const ada = await insertPatient(env, ws, 'mrn-p-ada');
    await insertPatient(env, ws, 'mrn-p-bob');
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const trigger = (await ws.call('POST', '/v1/triggers', { body: { name: 'Web', sourceId: blueprint.id, type: 'web', autoStart: false } })).json();
    for (const extId of ['mrn-p-ada', 'mrn-p-bob', 'mrn-p-ada', 'mrn-p-bob', 'mrn-p-ada']) {
      expect((await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: { payload: { subject: { reference: `Patient/${extId}` } } } })).statusCode).toBe(201);
    }
    for (let i = 0; i < 2; i++) {
      expect((await ws.call('POST', '/v1/search', { body: { resourceType: 'Patient', filters: [], limit: 10 } })).statusCode).toBe(200);
    }
    const whole = await list(ws, `recordId=${ada}&limit=100`);
    expect(whole.map((event) => event.action)).toEqual(['search.execute', 'search.execute', 'run.create', 'run.create', 'run.create']);
    // The read of `whole` is Ada's newest event now (audit.read); the pages' own reads come after
    // the page each was read from, so none shows on a later page.
    const paged = await allPages(ws, `recordId=${ada}&limit=2`);
    expect(paged.sizes).toEqual([2, 2, 2]);
    expect(paged.events).toEqual([
      expect.objectContaining({ action: 'audit.read', resourceId: ada, details: { filters: { recordId: ada }, cursor: false, count: whole.length } }),
      ...whole,
    ]);
    const runs = await allPages(ws, `recordId=${ada}&action=run.create&limit=2`);
    expect(runs.sizes).toEqual([2, 1]);
    expect(runs.events).toEqual(whole.filter((event) => event.action === 'run.create'));
    const byKey = await allPages(ws, `keyId=${ws.keyId}&limit=2`);
    // Read whole afterwards, the key's list has the reads of byKey's pages on top, newest (the
    // last page's, which followed a cursor) first.
    const pageReads = byKey.sizes.map((size, n) => ({ filters: { keyId: ws.keyId }, cursor: n > 0, count: size })).reverse();
    const afterwards = await list(ws, `keyId=${ws.keyId}&limit=100`);
    expect(afterwards.slice(0, pageReads.length).map((event) => [event.action, event.details])).toEqual(pageReads.map((details) => ['audit.read', details]));
    expect(byKey.events).toEqual(afterwards.slice(pageReads.length));
    expect(byKey.sizes.every((size) => size <= 2)).toBe(true);
  });

  it("answers an empty list for a record or key of another workspace or tenant, never their events", async () => {
    const ws = await env.workspace();
    const sameTenant = await env.workspace(`tenant-of-${ws.workspaceId}`);
    const sibling = await env.workspace(`tenant-of-${ws.workspaceId}`);
    const otherTenant = await env.workspace();
    const ada = await insertPatient(env, ws, 'mrn-x-ada');
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const trigger = (await ws.call('POST', '/v1/triggers', { body: { name: 'Web', sourceId: blueprint.id, type: 'web' } })).json();
    expect((await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: { payload: { subject: { reference: 'Patient/mrn-x-ada' } } } })).statusCode).toBe(201);
    expect(await list(ws, `recordId=${ada}`)).toHaveLength(1);
    expect(await list(ws, `keyId=${ws.keyId}`)).not.toEqual([]);
    for (const stranger of [sameTenant, sibling, otherTenant]) {
      expect(await list(stranger, `recordId=${ada}`)).toEqual([]);
      expect(await list(stranger, `keyId=${ws.keyId}`)).toEqual([]);
      expect(await list(stranger, `recordId=${ada}&keyId=${ws.keyId}`)).toEqual([]);
    }
  });

  it('refuses a recordId or keyId that is not a UUID, and unknown parameters, with the error body', async () => {
    const ws = await env.workspace();
    for (const [query, field] of [
      ['recordId=not-a-uuid', 'querystring.recordId'],
      ['keyId=123', 'querystring.keyId'],
      ['recordId=', 'querystring.recordId'],
      [`recordId=${uuidv7()}&keyId=${'f'.repeat(36)}`, 'querystring.keyId'],
      ['record=01900000-0000-7000-8000-000000000000', 'record'],
    ] as const) {
      const res = await ws.call('GET', `/v1/audit-events?${query}`, { headers: { 'x-request-id': 'bad-filter' } });
      expect(res.statusCode, query).toBe(400);
      expect(res.json(), query).toEqual({ error: expect.stringContaining(field), code: 'invalid_request', requestId: 'bad-filter' });
    }
  });
});

/** An audit event's row as the code before migration 0021 stored it (no index rows). */
function storedEvent(workspaceId: string, e: { id: string; action: string; resourceType: string | null; resourceId: string | null; details: unknown }) {
  return {
    id: e.id, tenant_id: 'tenant', workspace_id: workspaceId, at: '2026-11-01T00:00:00.000Z', action: e.action, request_id: 'r', key_id: null,
    key_name: 'k', resource_type: e.resourceType, resource_id: e.resourceId, outcome: 'success', details: JSON.stringify(e.details),
  };
}

for (const kind of STORE_KINDS) {
  describe(`migration 0021 indexes the events stored before it [${kind}]`, () => {
    const stores = storesAtMigration(kind);
    afterAll(() => stores.closeAll());

    it('names the records of each event as the writers name them now, and nothing for the others', async () => {
      const { store, migrator } = await stores.open('0020_search_inputs_check');

      const at = '2026-11-01T00:00:00.000Z';
      const [w, elsewhere] = [uuidv7(), uuidv7()];
      const [ada, bob, cy] = [uuidv7(), uuidv7(), uuidv7()];
      const [adaRun, bareRun, foreignRun] = [uuidv7(), uuidv7(), uuidv7()];
      const run = (id: string, workspaceId: string, subject: string | null) => ({
        id, workspace_id: workspaceId, trigger_id: 't', source_id: 's', source_version: 1, name: 'n', idempotency_key: null,
        automation_status: 'queued', error: null, payload: null, subject_record_id: subject, created_at: at, updated_at: at, available_at: at,
      });
      await store.db.insertInto('runs').values([run(adaRun, w, ada), run(bareRun, w, null), run(foreignRun, elsewhere, bob)] as never).execute();
      // Rows as the code before 0021 wrote them: run actions and tag changes of a Pathway record
      // without the run's patient record in their details.
      const event = (id: string, action: string, resourceType: string | null, resourceId: string | null, details: object, workspaceId = w) =>
        storedEvent(workspaceId, { id, action, resourceType, resourceId, details });
      const ids = Array.from({ length: 12 }, () => uuidv7());
      await store.db
        .insertInto('audit_events')
        .values([
          event(ids[0], 'run.create', 'run', adaRun, { triggerId: 't', sourceId: 's', status: 'queued', subjectRecordId: ada }),
          event(ids[1], 'run.cancel', 'run', adaRun, { from: 'queued', to: 'canceled' }),
          event(ids[2], 'run.steps.read', 'run', bareRun, { subjectRecordId: null, steps: 0, cursor: false }),
          event(ids[3], 'search.execute', 'search', null, { resourceType: 'Patient', filters: [], total: 3, limit: 10, offset: 0, ids: [ada, bob] }),
          event(ids[4], 'search.execute', 'search', null, { resourceType: 'Patient', filters: [], total: 3, countOnly: true }),
          event(ids[5], 'delivery.process', 'delivery', uuidv7(), { webhookId: 'h', patientRecordIds: [bob, cy], resources: { Patient: 2 }, skipped: 0, runsStarted: 0 }),
          event(ids[6], 'record.tags.change', 'record', adaRun, { target: 'pathway', runId: adaRun, nodeId: 'a', automationId: 'x', add: ['x'], remove: [] }),
          event(ids[7], 'record.tags.change', 'record', cy, { target: 'subject', runId: bareRun, nodeId: 'a', automationId: 'x', add: ['x'], remove: [] }),
          event(ids[8], 'http.send', 'run', adaRun, { nodeId: 'a', automationId: 'x', subjectRecordId: ada, method: 'POST', origin: 'https://p', tries: 1, status: 200 }),
          event(ids[9], 'trigger.create', 'trigger', uuidv7(), { name: 'x', ids: [ada] }),
          event(ids[10], 'run.pause', 'run', foreignRun, { from: 'queued', to: 'paused' }, elsewhere),
          // A search of Pathway records: the runs listed, their patients too (another workspace's run names no one here).
          event(ids[11], 'search.execute', 'search', null, { resourceType: 'Pathway', filters: [], total: 3, limit: 10, offset: 0, ids: [adaRun, bareRun, foreignRun] }),
        ])
        .execute();

      expect((await migrator.migrateToLatest()).error).toBeUndefined();
      const rows = await store.db.selectFrom('audit_event_records').selectAll().execute();
      const got = rows.map((row) => `${row.workspace_id === w ? 'w' : 'elsewhere'} ${row.event_id} ${row.record_id}`).sort();
      const expected = [
        [ids[0], adaRun], [ids[0], ada],
        [ids[1], adaRun], [ids[1], ada],
        [ids[2], bareRun],
        [ids[3], ada], [ids[3], bob],
        [ids[5], bob], [ids[5], cy],
        [ids[6], adaRun], [ids[6], ada],
        [ids[7], cy],
        [ids[8], adaRun], [ids[8], ada],
        [ids[11], adaRun], [ids[11], bareRun], [ids[11], foreignRun], [ids[11], ada],
      ].map(([eventId, recordId]) => `w ${eventId} ${recordId}`);
      expected.push(`elsewhere ${ids[10]} ${foreignRun}`, `elsewhere ${ids[10]} ${bob}`);
      expect(got).toEqual(expected.sort());
    });

    it('takes odd details as they were stored: ids that are no array or hold other values than strings, a null subject, a mere mention', async () => {
      const { store, migrator } = await stores.open('0020_search_inputs_check');

      const w = uuidv7();
      const [ada, bob] = [uuidv7(), uuidv7()];
      const event = (id: string, action: string, resourceType: string | null, details: unknown) =>
        storedEvent(w, { id, action, resourceType, resourceId: null, details });
      const ids = Array.from({ length: 9 }, () => uuidv7());
      await store.db
        .insertInto('audit_events')
        .values([
          event(ids[0], 'search.execute', 'search', { resourceType: 'Patient', ids: [ada, null, 7, { id: bob }, [bob], true] }),
          event(ids[1], 'search.execute', 'search', { resourceType: 'Patient', ids: ada }),
          event(ids[2], 'search.execute', 'search', { resourceType: 'Patient', ids: { ada } }),
          event(ids[3], 'delivery.process', 'delivery', { patientRecordIds: [null, bob, 12] }),
          event(ids[4], 'delivery.process', 'delivery', { patientRecordIds: bob }),
          event(ids[5], 'run.steps.read', 'run', { subjectRecordId: null }),
          event(ids[6], 'http.send', 'run', { subjectRecordId: 42, note: 'the "ids" and "patientRecordIds" are "subjectRecordId"' }),
          event(ids[7], 'search.execute', 'search', { filters: [{ op: 'with', tag: '"ids"' }] }),
          event(ids[8], 'search.execute', 'search', [ada]),
        ])
        .execute();

      expect((await migrator.migrateToLatest()).error).toBeUndefined();
      const rows = await store.db.selectFrom('audit_event_records').selectAll().execute();
      expect(rows.map((row) => `${row.event_id} ${row.record_id}`).sort()).toEqual([`${ids[0]} ${ada}`, `${ids[3]} ${bob}`].sort());
    });
  });
}
