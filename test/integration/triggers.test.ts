import { expect, it } from 'vitest';
import { describeEachStore, simpleBlueprint, type TestWorkspace } from '../helpers/test-env.js';

async function blueprintAndQuery(ws: TestWorkspace) {
  const blueprint = await ws.importBlueprint(simpleBlueprint());
  const query = await ws.call('POST', '/v1/queries', { body: { name: 'Diabetics', resourceType: 'Patient', filters: [{ op: 'with', tag: 'diabetes' }] } });
  expect(query.statusCode).toBe(201);
  return { blueprintId: blueprint.id, queryId: query.json().queryId as string };
}

describeEachStore('triggers', (env) => {
  it('creates each type with defaults and type-specific fields', async () => {
    const ws = await env.workspace();
    const { blueprintId, queryId } = await blueprintAndQuery(ws);

    const web = await ws.call('POST', '/v1/triggers', { body: { name: 'Web', sourceId: blueprintId, type: 'web' } });
    expect(web.statusCode).toBe(201);
    expect(web.json()).toMatchObject({
      name: 'Web', sourceId: blueprintId, type: 'web', queryId: null, event: null, schedule: null,
      nextRunAt: null, autoStart: true, active: true, onePerSubject: null,
    });
    expect(web.json().createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);

    const search = await ws.call('POST', '/v1/triggers', {
      body: { name: 'Daily', sourceId: blueprintId, type: 'search', queryId, schedule: { interval: 'P1D', timezone: 'Europe/Amsterdam', startAt: '2030-01-01T08:00:00+01:00' } },
    });
    expect(search.statusCode).toBe(201);
    expect(search.json()).toMatchObject({
      type: 'search', queryId, onePerSubject: true,
      schedule: { interval: 'P1D', timezone: 'Europe/Amsterdam', startAt: '2030-01-01T07:00:00.000Z' },
      nextRunAt: '2030-01-01T07:00:00.000Z',
    });

    const event = await ws.call('POST', '/v1/triggers', { body: { name: 'Discharge', sourceId: blueprintId, type: 'event', event: 'Encounter.finished', autoStart: false } });
    expect(event.statusCode).toBe(201);
    expect(event.json()).toMatchObject({ type: 'event', event: 'Encounter.finished', onePerSubject: false, autoStart: false });
  });

  it('refuses fields of another type, missing type fields and foreign ids with 400', async () => {
    const ws = await env.workspace();
    const other = await env.workspace();
    const { blueprintId, queryId } = await blueprintAndQuery(ws);
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ name: 'x', sourceId: blueprintId, type: 'web', event: 'Patient.created' }, /event/],
      [{ name: 'x', sourceId: blueprintId, type: 'web', queryId }, /queryId/],
      // Sent is sent, null included (DESIGN §2).
      [{ name: 'x', sourceId: blueprintId, type: 'web', queryId: null }, /^body\.queryId does not apply to a web trigger$/],
      [{ name: 'x', sourceId: blueprintId, type: 'event', event: 'Patient.created', schedule: null }, /^body\.schedule does not apply to an event trigger$/],
      [{ name: 'x', sourceId: blueprintId, type: 'event', schedule: { interval: 'P1D', timezone: 'UTC' } }, /schedule/],
      [{ name: 'x', sourceId: blueprintId, type: 'search' }, /queryId/],
      [{ name: 'x', sourceId: blueprintId, type: 'event' }, /event/],
      [{ name: 'x', sourceId: blueprintId, type: 'event', event: 'not an event' }, /^body\.event must be an event name, <ResourceType>\.<event>, such as Encounter\.finished/],
      // Well-formed, but never raised: a trigger on it would wait forever without a word.
      [{ name: 'x', sourceId: blueprintId, type: 'event', event: 'Observation.finalised' }, /^body\.event Observation has no status "finalised": its events are created, updated, deleted, registered, preliminary, final,/],
      // Condition has clinicalStatus, not status: Condition.active was taken and never fired.
      [{ name: 'x', sourceId: blueprintId, type: 'event', event: 'Condition.active' }, /^body\.event Condition has no status element, so it raises no status events: its events are created, updated and deleted/],
      [{ name: 'x', sourceId: blueprintId, type: 'event', event: 'Coverage.expired' }, /^body\.event Coverage has no status "expired": its events are created, updated, deleted, active, cancelled, draft, entered-in-error$/],
      [{ name: 'x', sourceId: blueprintId, type: 'event', event: 'Labresult.final' }, /^body\.event "Labresult" is not a FHIR R4 resource type/],
      [{ name: 'x', sourceId: blueprintId, type: 'event', event: 'MedicationrEquest.active' }, /names are case-sensitive: MedicationRequest$/],
      [{ name: 'x', sourceId: blueprintId, type: 'event', event: 'encounter.finished' }, /^body\.event "encounter" is not a FHIR R4 resource type; names are case-sensitive: Encounter$/],
      [{ name: 'x', sourceId: blueprintId, type: 'event', event: 'Encounter.Finished' }, /^body\.event Encounter has no status "Finished"/],
      [{ name: 'x', sourceId: blueprintId, type: 'search', queryId, schedule: { interval: 'PT30S', timezone: 'UTC' } }, /interval/],
      [{ name: 'x', sourceId: blueprintId, type: 'search', queryId, schedule: { interval: 'P1D', timezone: 'Mars/Base' } }, /timezone/],
      [{ name: 'x', sourceId: blueprintId, type: 'cron' }, /type/],
      [{ name: '', sourceId: blueprintId, type: 'web' }, /name/],
      [{ sourceId: blueprintId, type: 'web' }, /name/],
      [{ name: 'x', sourceId: blueprintId, type: 'web', colour: 'red' }, /colour/],
    ];
    for (const [body, message] of cases) {
      const res = await ws.call('POST', '/v1/triggers', { body });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
      expect(res.json().error).toMatch(message);
    }
    // Ids of another tenant's workspace are unknown here.
    const foreignBlueprint = await other.importBlueprint(simpleBlueprint('Theirs'));
    const res = await ws.call('POST', '/v1/triggers', { body: { name: 'x', sourceId: foreignBlueprint.id, type: 'web' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/sourceId/);
    const list = (await ws.call('GET', '/v1/triggers')).json();
    expect(list.data).toHaveLength(0);
  });

  it('refuses a PATCH to an event carepath never raises and keeps the trigger as it was', async () => {
    const ws = await env.workspace();
    const { blueprintId } = await blueprintAndQuery(ws);
    const created = (await ws.call('POST', '/v1/triggers', { body: { name: 'x', sourceId: blueprintId, type: 'event', event: 'Encounter.finished' } })).json();
    const res = await ws.call('PATCH', `/v1/triggers/${created.triggerId}`, { body: { event: 'Encounter.complete' } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_request', error: expect.stringMatching(/^body\.event Encounter has no status "complete"/) });
    expect((await ws.call('GET', `/v1/triggers/${created.triggerId}`)).json().event).toBe('Encounter.finished');
  });

  it('refuses an unknown field in a schedule on create and on PATCH, naming it; nothing is created or changed', async () => {
    // `startTime` for `startAt` is an easy slip: taken silently, the series would start at once
    // instead of in 2030. The schedule object is closed like every other body object.
    const ws = await env.workspace();
    const { blueprintId, queryId } = await blueprintAndQuery(ws);
    const slipped = { interval: 'PT1H', timezone: 'UTC', startTime: '2030-01-01T00:00:00Z' };
    const create = await ws.call('POST', '/v1/triggers', { body: { name: 'Cohort', sourceId: blueprintId, type: 'search', queryId, schedule: slipped } });
    expect(create.statusCode).toBe(400);
    // The request schema names the field by its place in the body, as for every unknown field.
    expect(create.json()).toMatchObject({ code: 'invalid_request', error: 'body.schedule: unknown field "startTime"' });
    expect((await ws.call('GET', '/v1/triggers')).json().data).toHaveLength(0);
    expect(await env.db.selectFrom('triggers').select('id').where('workspace_id', '=', ws.workspaceId).execute()).toEqual([]);

    const created = (
      await ws.call('POST', '/v1/triggers', { body: { name: 'Cohort', sourceId: blueprintId, type: 'search', queryId, schedule: { interval: 'P1D', timezone: 'UTC' } } })
    ).json();
    const url = `/v1/triggers/${created.triggerId}`;
    const patch = await ws.call('PATCH', url, { body: { schedule: slipped } });
    expect(patch.statusCode).toBe(400);
    expect(patch.json()).toMatchObject({ code: 'invalid_request', error: 'body.schedule: unknown field "startTime"' });
    expect((await ws.call('GET', url)).json()).toEqual(created);
  });

  it('patches partially, clears with null, and refuses type changes', async () => {
    const ws = await env.workspace();
    const { blueprintId, queryId } = await blueprintAndQuery(ws);
    const created = (
      await ws.call('POST', '/v1/triggers', { body: { name: 'Cohort', sourceId: blueprintId, type: 'search', queryId, schedule: { interval: 'PT1H', timezone: 'UTC' } } })
    ).json();
    const url = `/v1/triggers/${created.triggerId}`;
    const renamed = await ws.call('PATCH', url, { body: { name: 'Cohort 2', active: false } });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json()).toMatchObject({ name: 'Cohort 2', active: false, queryId, schedule: { interval: 'PT1H' } });
    const cleared = await ws.call('PATCH', url, { body: { schedule: null } });
    expect(cleared.json()).toMatchObject({ schedule: null, nextRunAt: null, name: 'Cohort 2' });
    for (const body of [{ type: 'web' }, { event: 'Patient.created' }, { event: null }, { queryId: null }, { name: 5 }]) {
      const res = await ws.call('PATCH', url, { body });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
    }
    expect((await ws.call('GET', url)).json()).toMatchObject({ name: 'Cohort 2', type: 'search', queryId });
  });

  it('lists with filters and pages without repeats', async () => {
    const ws = await env.workspace();
    const { blueprintId } = await blueprintAndQuery(ws);
    for (let i = 0; i < 5; i++) {
      await ws.call('POST', '/v1/triggers', { body: { name: `W${i}`, sourceId: blueprintId, type: 'web', active: i % 2 === 0 } });
    }
    await ws.call('POST', '/v1/triggers', { body: { name: 'E', sourceId: blueprintId, type: 'event', event: 'Patient.created' } });
    expect((await ws.call('GET', '/v1/triggers?type=web')).json().data).toHaveLength(5);
    expect((await ws.call('GET', '/v1/triggers?type=web&active=false')).json().data).toHaveLength(2);
    expect((await ws.call('GET', `/v1/triggers?sourceId=${blueprintId}&limit=100`)).json().data).toHaveLength(6);
    const first = (await ws.call('GET', '/v1/triggers?limit=4')).json();
    const second = (await ws.call('GET', `/v1/triggers?limit=4&cursor=${first.nextCursor}`)).json();
    expect(first.data.map((t: { name: string }) => t.name)).toEqual(['E', 'W4', 'W3', 'W2']);
    expect(second.data.map((t: { name: string }) => t.name)).toEqual(['W1', 'W0']);
    expect(second.nextCursor).toBeNull();
    expect((await ws.call('GET', '/v1/triggers?active=maybe')).statusCode).toBe(400);
  });

  it('deletes: 204, then 404 for get, patch and fire; runs are kept and the status stays readable', async () => {
    const ws = await env.workspace();
    const { blueprintId } = await blueprintAndQuery(ws);
    const trigger = (await ws.call('POST', '/v1/triggers', { body: { name: 'W', sourceId: blueprintId, type: 'web' } })).json();
    const url = `/v1/triggers/${trigger.triggerId}`;
    const run = (await ws.call('POST', url, { body: {} })).json();
    const deleted = await ws.call('DELETE', url);
    expect(deleted.statusCode).toBe(204);
    expect(deleted.body).toBe('');
    expect((await ws.call('GET', url)).statusCode).toBe(404);
    expect((await ws.call('PATCH', url, { body: { name: 'again' } })).statusCode).toBe(404);
    expect((await ws.call('POST', url, { body: {} })).statusCode).toBe(404);
    expect((await ws.call('DELETE', url)).statusCode).toBe(404);
    expect((await ws.call('GET', `/v1/runs/${run.runId}`)).statusCode).toBe(200);
    expect((await ws.call('GET', `${url}/status`)).json().scheduled).toBe(1);
  });

  it('refuses to fire an inactive trigger with trigger_inactive', async () => {
    const ws = await env.workspace();
    const { blueprintId } = await blueprintAndQuery(ws);
    const trigger = (await ws.call('POST', '/v1/triggers', { body: { name: 'W', sourceId: blueprintId, type: 'web', active: false } })).json();
    const res = await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: {} });
    expect(res.statusCode).toBe(409);
    expect(res.json().code).toBe('trigger_inactive');
    expect((await ws.call('GET', '/v1/runs')).json().data).toHaveLength(0);
  });

  it('honours autoStart from the body over the trigger and links payload.subject to a known patient', async () => {
    const ws = await env.workspace();
    const { blueprintId } = await blueprintAndQuery(ws);
    const trigger = (await ws.call('POST', '/v1/triggers', { body: { name: 'W', sourceId: blueprintId, type: 'web' } })).json();
    const queued = await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: { autoStart: false } });
    expect(queued.json().automationStatus).toBe('queued');
    const { insertRecords } = await import('../../src/modules/records/record.repository.js');
    const [patientId] = await insertRecords(env.db, ws.workspaceId, [{ resourceType: 'Patient', extId: 'p-1', name: 'Ada', tags: [] }], new Date().toISOString());
    const withSubject = await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: { payload: { subject: { reference: 'Patient/p-1' } } } });
    const row = await env.db.selectFrom('runs').select('subject_record_id').where('id', '=', withSubject.json().runId).executeTakeFirstOrThrow();
    expect(row.subject_record_id).toBe(patientId);
  });

  it('takes the Idempotency-Key header over the body key', async () => {
    const ws = await env.workspace();
    const { blueprintId } = await blueprintAndQuery(ws);
    const trigger = (await ws.call('POST', '/v1/triggers', { body: { name: 'W', sourceId: blueprintId, type: 'web' } })).json();
    const res = await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: { idempotencyKey: 'from-body' }, headers: { 'idempotency-key': 'from-header' } });
    expect(res.json().idempotencyKey).toBe('from-header');
    const bad = await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: {}, headers: { 'idempotency-key': 'x'.repeat(256) } });
    expect(bad.statusCode).toBe(400);
  });
});

describeEachStore('trigger edge cases', (env) => {
  it('will not reactivate a search trigger whose query was deleted while it was off', async () => {
    const ws = await env.workspace();
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const query = (await ws.call('POST', '/v1/queries', { body: { name: 'Q', resourceType: 'Patient' } })).json();
    const trigger = (
      await ws.call('POST', '/v1/triggers', { body: { name: 'S', sourceId: blueprint.id, type: 'search', queryId: query.queryId, active: false } })
    ).json();
    expect((await ws.call('DELETE', `/v1/queries/${query.queryId}`)).statusCode).toBe(204);
    const res = await ws.call('PATCH', `/v1/triggers/${trigger.triggerId}`, { body: { active: true } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/queryId/);
    expect((await ws.call('GET', `/v1/triggers/${trigger.triggerId}`)).json().active).toBe(false);
  });

  it('refuses a JSON null body on fire and names every allowed value of an enum', async () => {
    const ws = await env.workspace();
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const trigger = (await ws.call('POST', '/v1/triggers', { body: { name: 'W', sourceId: blueprint.id, type: 'web' } })).json();
    const res = await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { payload: 'null', headers: { 'content-type': 'application/json' } });
    expect(res.statusCode).toBe(400);
    expect((await ws.call('GET', '/v1/runs')).json().data).toHaveLength(0);
    const bad = await ws.call('POST', '/v1/triggers', { body: { name: 'x', sourceId: blueprint.id, type: 'cron' } });
    expect(bad.json().error).toBe('body.type must be one of "web", "search", "event"');
  });
});
