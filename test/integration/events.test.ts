import { expect, it } from 'vitest';
import { describeEachStore, type TestWorkspace } from '../helpers/test-env.js';
import {
  createEndpoint,
  deliver,
  deliverAndProcess,
  eventTrigger,
  lastDelivery,
  nowSeconds,
  processorFor,
  runsOf,
  search,
  type Endpoint,
} from '../helpers/deliveries.js';
import { changeTags, findRecordByExtId } from '../../src/modules/records/record.repository.js';
import { chain, fire, recordTags, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { capturedLogger } from '../helpers/log-capture.js';

const patient = (id: string, extra: Record<string, unknown> = {}) => ({ resourceType: 'Patient', id, name: [{ text: `Patient ${id}` }], ...extra });
const encounter = (id: string, status: string, patientId: string) => ({
  resourceType: 'Encounter',
  id,
  status,
  class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
  subject: { reference: `Patient/${patientId}` },
});
const collection = (...resources: object[]) => ({ resourceType: 'Bundle', type: 'collection', entry: resources.map((resource) => ({ resource })) });
const deletion = (type: string, id: string) => ({
  resourceType: 'Bundle',
  type: 'transaction',
  entry: [{ request: { method: 'DELETE', url: `${type}/${id}` } }],
});

describeEachStore('events raised from deliveries', (env) => {
  let ws: TestWorkspace;
  let feed: Endpoint;
  const eventsOf = async () => (await lastDelivery(ws, feed)).events as { event: string; count: number }[];

  it('raises created, then updated; a status event only when the status changes', async () => {
    ws = await env.workspace();
    feed = await createEndpoint(ws);
    await deliverAndProcess(env, feed, collection(patient('e1'), encounter('enc-1', 'in-progress', 'e1')));
    expect(await eventsOf()).toEqual([
      { event: 'Encounter.created', count: 1 },
      { event: 'Encounter.in-progress', count: 1 },
      { event: 'Patient.created', count: 1 },
    ]);
    await deliverAndProcess(env, feed, { ...encounter('enc-1', 'in-progress', 'e1'), language: 'en' });
    expect(await eventsOf()).toEqual([{ event: 'Encounter.updated', count: 1 }]);
    await deliverAndProcess(env, feed, encounter('enc-1', 'finished', 'e1'));
    expect(await eventsOf()).toEqual([
      { event: 'Encounter.finished', count: 1 },
      { event: 'Encounter.updated', count: 1 },
    ]);
    // The same content again, a second later (the same request within the same second is a
    // replay, taken once: webhook-delivery.test.ts): nothing happened to it, no event.
    await deliverAndProcess(env, feed, encounter('enc-1', 'finished', 'e1'), { t: nowSeconds(env.container) + 1 });
    expect(await eventsOf()).toEqual([]);
    // Its elements in another order are another text: counted as a change.
    const { status, ...rest } = encounter('enc-1', 'finished', 'e1');
    await deliverAndProcess(env, feed, { status, ...rest }, { t: nowSeconds(env.container) + 2 });
    expect(await eventsOf()).toEqual([{ event: 'Encounter.updated', count: 1 }]);
  });

  it('apply a history bundle oldest first, though it lists the newest first: the newest version is what stays', async () => {
    const ws2 = await env.workspace();
    const feed2 = await createEndpoint(ws2);
    const version = (status: string, versionId: string) => ({ ...encounter('h-1', status, 'h-p'), meta: { versionId } });
    const history = (...entries: object[]) => ({ resourceType: 'Bundle', type: 'history', entry: entries });
    const put = (resource: { id: string }) => ({ resource, request: { method: 'PUT', url: `Encounter/${resource.id}` } });
    await deliverAndProcess(env, feed2, history(put(version('finished', '3')), put(version('in-progress', '2')), put(version('planned', '1'))));
    expect((await lastDelivery(ws2, feed2)).events).toEqual([
      { event: 'Encounter.created', count: 1 },
      { event: 'Encounter.finished', count: 1 },
      { event: 'Encounter.in-progress', count: 1 },
      { event: 'Encounter.planned', count: 1 },
      { event: 'Encounter.updated', count: 2 },
    ]);
    // The newest version, sent again as it is: nothing happened to it.
    await deliverAndProcess(env, feed2, version('finished', '3'));
    expect((await lastDelivery(ws2, feed2)).events).toEqual([]);
    // A deletion listed first is the newest: the resource stays deleted.
    await deliverAndProcess(env, feed2, history({ request: { method: 'DELETE', url: 'Encounter/h-2' } }, put({ ...encounter('h-2', 'finished', 'h-p') })));
    await deliverAndProcess(env, feed2, encounter('h-2', 'finished', 'h-p'));
    expect((await lastDelivery(ws2, feed2)).events).toEqual([
      { event: 'Encounter.created', count: 1 },
      { event: 'Encounter.finished', count: 1 },
    ]);
    // An entry that is a Bundle keeps its own order: its PUT then DELETE is the newest.
    const transaction = { resourceType: 'Bundle', type: 'transaction', entry: [put(encounter('h-3', 'finished', 'h-p')), { request: { method: 'DELETE', url: 'Encounter/h-3' } }] };
    await deliverAndProcess(env, feed2, history({ resource: transaction }, put(encounter('h-3', 'planned', 'h-p'))));
    await deliverAndProcess(env, feed2, encounter('h-3', 'finished', 'h-p'));
    expect((await lastDelivery(ws2, feed2)).events).toEqual([
      { event: 'Encounter.created', count: 1 },
      { event: 'Encounter.finished', count: 1 },
    ]);
  });

  it('raise nothing for a resource sent again unchanged: a trigger on updated starts no run, search stays', async () => {
    const ws2 = await env.workspace();
    const feed2 = await createEndpoint(ws2);
    const updated = await eventTrigger(ws2, 'Patient.updated');
    const nightly = collection(patient('n1', { gender: 'female' }), patient('n2'));
    await deliverAndProcess(env, feed2, nightly, { key: 'export-mon' });
    // Signed at another second: the same body at the same second is the same request, replayed.
    await deliverAndProcess(env, feed2, nightly, { key: 'export-tue', t: nowSeconds(env.container) + 1 });
    expect((await lastDelivery(ws2, feed2)).events).toEqual([]);
    expect(await runsOf(ws2, `triggerId=${updated.triggerId}`)).toHaveLength(0);
    // One of them changed by Wednesday: one event, one run.
    await deliverAndProcess(env, feed2, collection(patient('n1', { gender: 'male' }), patient('n2')), { key: 'export-wed', t: nowSeconds(env.container) + 2 });
    expect((await lastDelivery(ws2, feed2)).events).toEqual([{ event: 'Patient.updated', count: 1 }]);
    expect(await runsOf(ws2, `triggerId=${updated.triggerId}`)).toHaveLength(1);
    const found = await ws2.call('POST', '/v1/search', { body: { resourceType: 'Patient' } });
    expect(found.json().results.map((hit: { extId: string }) => hit.extId).sort()).toEqual(['n1', 'n2']);
  });

  it('sees the order inside one bundle: created then updated, one status event per change', async () => {
    await deliverAndProcess(
      env,
      feed,
      collection(encounter('enc-2', 'planned', 'e1'), { ...encounter('enc-2', 'planned', 'e1'), language: 'en' }, encounter('enc-2', 'planned', 'e1'), encounter('enc-2', 'arrived', 'e1')),
    );
    expect(await eventsOf()).toEqual([
      { event: 'Encounter.arrived', count: 1 },
      { event: 'Encounter.created', count: 1 },
      { event: 'Encounter.planned', count: 1 },
      { event: 'Encounter.updated', count: 3 },
    ]);
  });

  it('raises deleted for DELETE entries; a later delivery is created again', async () => {
    await deliverAndProcess(env, feed, deletion('Encounter', 'enc-2'));
    expect(await eventsOf()).toEqual([{ event: 'Encounter.deleted', count: 1 }]);
    await deliverAndProcess(env, feed, encounter('enc-2', 'arrived', 'e1'));
    expect(await eventsOf()).toEqual([
      { event: 'Encounter.arrived', count: 1 },
      { event: 'Encounter.created', count: 1 },
    ]);
  });

  it('serves the catalogue to any valid key, filtered by resource type', async () => {
    const narrow = await ws.keyWith(['search:read']);
    const res = await ws.call('GET', '/v1/events/catalog', { key: narrow.key });
    expect(res.statusCode).toBe(200);
    const events = res.json().data.map((entry: { event: string }) => entry.event);
    expect(events).toEqual(expect.arrayContaining(['Encounter.finished', 'Observation.final', 'Appointment.booked', 'Patient.created', 'Patient.deleted', 'Coverage.active']));
    expect(events).not.toContain('Condition.active');
    const encounters = await ws.call('GET', '/v1/events/catalog?resourceType=Encounter');
    expect(encounters.json().data.every((entry: { event: string }) => entry.event.startsWith('Encounter.'))).toBe(true);
    expect(encounters.json().data.length).toBeGreaterThan(3);
    expect((await ws.call('GET', '/v1/events/catalog', { key: null })).statusCode).toBe(401);
    expect((await ws.call('GET', '/v1/events/catalog?resourceType=1x')).statusCode).toBe(400);
  });
});

describeEachStore('event triggers', (env) => {
  it('with a condition (when) start runs only for the events that meet it; PATCH changes or clears it', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const hba1c = "payload.resource.code.coding.where(system = 'http://loinc.org' and code = '4548-4').exists()";
    const diabetes = await eventTrigger(ws, 'Observation.final', { when: hba1c });
    const every = await eventTrigger(ws, 'Observation.final');
    const observation = (id: string, code: string, value: number) => ({
      resourceType: 'Observation',
      id,
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code }] },
      subject: { reference: 'Patient/w1' },
      valueQuantity: { value },
    });
    await deliverAndProcess(env, feed, collection(patient('w1'), observation('o-1', '4548-4', 9.1), observation('o-2', '29463-7', 81)));
    const started = await runsOf(ws, `triggerId=${diabetes.triggerId}`);
    expect(started).toHaveLength(1);
    const row = await env.db.selectFrom('runs').select('payload').where('id', '=', started[0].runId).executeTakeFirstOrThrow();
    expect(JSON.parse(row.payload!).resource.id).toBe('o-1');
    expect(await runsOf(ws, `triggerId=${every.triggerId}`)).toHaveLength(2);
    expect((await ws.call('GET', `/v1/triggers/${diabetes.triggerId}`)).json()).toMatchObject({ event: 'Observation.final', when: hba1c });
    expect((await ws.call('GET', `/v1/triggers/${every.triggerId}`)).json().when).toBeNull();

    // A condition that fails on a resource (two items where one Boolean is wanted) starts nothing.
    const patched = await ws.call('PATCH', `/v1/triggers/${diabetes.triggerId}`, { body: { when: 'payload.resource.code.coding.code' } });
    expect(patched.statusCode, patched.body).toBe(200);
    const twoCodes = { ...observation('o-3', '4548-4', 8), code: { coding: [{ code: 'a' }, { code: 'b' }] } };
    expect((await deliver(env, feed, twoCodes)).statusCode).toBe(202);
    const { logger, lines } = capturedLogger('info');
    await processorFor(env, {}, logger).drain();
    expect(await runsOf(ws, `triggerId=${diabetes.triggerId}`)).toHaveLength(1);
    // Told apart from false in the log: which trigger, on how many events; never the resource.
    const failed = lines.filter((line) => line.triggerId === diabetes.triggerId);
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ level: 40, events: 1, deliveryId: expect.any(String), webhookId: feed.webhookId });
    expect(failed[0].msg).toMatch(/^an event trigger's condition \(when\) could not be evaluated/);
    expect(JSON.stringify(lines)).not.toContain('o-3');
    // Cleared: every such event starts a run again.
    expect((await ws.call('PATCH', `/v1/triggers/${diabetes.triggerId}`, { body: { when: null } })).json().when).toBeNull();
    await deliverAndProcess(env, feed, observation('o-4', '29463-7', 80));
    expect(await runsOf(ws, `triggerId=${diabetes.triggerId}`)).toHaveLength(2);
  });

  it('refuse a condition that cannot compile, and one on a trigger of another type', async () => {
    const BOMB = `(${Array.from({ length: 60 }, (_, n) => n).join('|')})`;
    const ws = await env.workspace();
    const { sourceId } = await eventTrigger(ws, 'Patient.created');
    const create = (body: Record<string, unknown>) => ws.call('POST', '/v1/triggers', { body: { name: 'x', sourceId, ...body } });
    for (const [body, message] of [
      [{ type: 'event', event: 'Patient.created', when: 'payload.resource.(' }, /^body\.when does not compile: /],
      [{ type: 'event', event: 'Patient.created', when: 'payload.resource.exist()' }, /^body\.when fails even on an empty run context: /],
      [{ type: 'event', event: 'Patient.created', when: '' }, /when/],
      [{ type: 'event', event: 'Patient.created', when: "'a' | 'b'" }, /^body\.when can never hold: it gave 2 items where a single Boolean was expected$/],
      // One item that is not a Boolean counts as true: such a condition held for every event (an integration review).
      [{ type: 'event', event: 'Patient.created', when: "'abc'" }, /^body\.when always holds: it gives a string, not true or false, even with no data/],
      [{ type: 'event', event: 'Patient.created', when: '5' }, /^body\.when always holds: it gives a number/],
      // 990 parentheses within one another overflowed the checks' stack: a 500 (a verification round).
      [{ type: 'event', event: 'Patient.created', when: `${'('.repeat(990)}1${')'.repeat(990)} = 1` }, /^body\.when (does not compile|nests too deeply)/],
      [{ type: 'event', event: 'Patient.created', when: "payload.resource.gender.matches('^(fe)?male(?!x)')" }, /^body\.when matches\(\): regular expression .* is not supported: invalid or unsupported Perl syntax/],
      // Millions of items from literals alone: the check gives up after 250 ms instead of holding the process.
      [{ type: 'event', event: 'Patient.created', when: `${BOMB}.select(${BOMB}.select(${BOMB}.select(${BOMB}))).count() > 0` }, /^body\.when takes longer than 250 ms even on an empty run context/],
      // Checked on {payload} alone: a path from anywhere else found nothing and never held, silently.
      [{ type: 'event', event: 'Patient.created', when: "resource.gender = 'female'" }, /^body\.when reads resource at the top, .*payload\.resource/],
      [{ type: 'event', event: 'Patient.created', when: "subject.tags contains 'copd'" }, /^body\.when reads subject, which a trigger's condition does not have/],
      [{ type: 'event', event: 'Patient.created', when: "payload.resource.exists() and vars.x > 1" }, /^body\.when reads vars/],
      [{ type: 'web', when: 'true' }, /^body\.when does not apply to a web trigger$/],
    ] as const) {
      const res = await create(body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_request', error: expect.stringMatching(message) });
    }
    expect((await ws.call('GET', '/v1/triggers?type=event')).json().data).toHaveLength(1);
    // Names inside a function's arguments are read from each item, not the root: still taken.
    const within = await create({ type: 'event', event: 'Patient.created', when: "payload.resource.name.where(family = 'Jansen').exists()" });
    expect(within.statusCode, within.body).toBe(201);
  });

  it('start one run per matching event: payload {event, resource, deliveryId}, subject, key, audit', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const finished = await eventTrigger(ws, 'Encounter.finished');
    const created = await eventTrigger(ws, 'Encounter.created');
    const second = await eventTrigger(ws, 'Encounter.finished');
    const body = collection(patient('t1'), encounter('f-1', 'finished', 't1'), encounter('f-2', 'finished', 't1'));
    await deliverAndProcess(env, feed, body, { key: 'visit-42', headers: { 'x-request-id': 'req-visit-42' } });

    const delivery = await env.db.selectFrom('deliveries').select('id').where('idempotency_key', '=', 'visit-42').executeTakeFirstOrThrow();
    expect((await runsOf(ws, `triggerId=${finished.triggerId}`)).length).toBe(2);
    expect((await runsOf(ws, `triggerId=${created.triggerId}`)).length).toBe(2);
    expect((await runsOf(ws, `triggerId=${second.triggerId}`)).length).toBe(2);
    const byKey = await runsOf(ws, 'idempotencyKey=visit-42');
    expect(byKey).toHaveLength(6);
    expect(byKey.every((run: { automationStatus: string; idempotencyKey: string }) => run.automationStatus === 'scheduled' && run.idempotencyKey === 'visit-42')).toBe(true);
    expect((await lastDelivery(ws, feed)).runsStarted).toBe(6);

    const subject = await findRecordByExtId(env.db, ws.workspaceId, 'Patient', 't1');
    const rows = await env.db.selectFrom('runs').select(['payload', 'subject_record_id']).where('trigger_id', '=', finished.triggerId).execute();
    for (const row of rows) {
      expect(row.subject_record_id).toBe(subject!.id);
      const payload = JSON.parse(row.payload!);
      expect(Object.keys(payload).sort()).toEqual(['deliveryId', 'event', 'resource']);
      expect(payload).toMatchObject({ event: 'Encounter.finished', deliveryId: delivery.id, resource: { resourceType: 'Encounter', status: 'finished' } });
    }

    const audit = await ws.call('GET', '/v1/audit-events?action=run.create&limit=100');
    const events = audit.json().data as { requestId: string; keyName: string; details: Record<string, unknown> }[];
    expect(events).toHaveLength(6);
    for (const event of events) {
      expect(event.requestId).toBe('req-visit-42');
      expect(event.keyName).toBe('carepath');
      expect(event.details).toMatchObject({ via: 'event', deliveryId: delivery.id });
    }
  });

  it('gives an Appointment.booked run the patient among the appointment\'s participants', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const booked = await eventTrigger(ws, 'Appointment.booked');
    const appointment = {
      resourceType: 'Appointment',
      id: 'appt-1',
      status: 'booked',
      participant: [
        { actor: { reference: 'Practitioner/dr-1' }, status: 'accepted' },
        { actor: { reference: 'Patient/p-appt' }, status: 'accepted' },
      ],
    };
    await deliverAndProcess(env, feed, collection(patient('p-appt'), appointment));
    const subject = await findRecordByExtId(env.db, ws.workspaceId, 'Patient', 'p-appt');
    const rows = await env.db.selectFrom('runs').select('subject_record_id').where('trigger_id', '=', booked.triggerId).execute();
    expect(rows).toEqual([{ subject_record_id: subject!.id }]);
  });

  it('autoStart false makes queued runs; inactive and deleted triggers start none', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const queued = await eventTrigger(ws, 'Encounter.arrived', { autoStart: false });
    const inactive = await eventTrigger(ws, 'Encounter.arrived', { active: false });
    const deleted = await eventTrigger(ws, 'Encounter.arrived');
    expect((await ws.call('DELETE', `/v1/triggers/${deleted.triggerId}`)).statusCode).toBe(204);
    await deliverAndProcess(env, feed, encounter('a-1', 'arrived', 'q1'));
    const runs = await runsOf(ws, `triggerId=${queued.triggerId}`);
    expect(runs.map((run: { automationStatus: string }) => run.automationStatus)).toEqual(['queued']);
    expect(await runsOf(ws, `triggerId=${inactive.triggerId}`)).toHaveLength(0);
    expect(await runsOf(ws, `triggerId=${deleted.triggerId}`)).toHaveLength(0);
  });

  it('honours onePerSubject: no second run while the subject has a live run of the trigger', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const once = await eventTrigger(ws, 'Encounter.finished', { onePerSubject: true });
    await deliverAndProcess(env, feed, collection(encounter('o-1', 'finished', 'o1'), encounter('o-2', 'finished', 'o1'), encounter('o-3', 'finished', 'o2')));
    const first = await runsOf(ws, `triggerId=${once.triggerId}`);
    expect(first).toHaveLength(2);
    await deliverAndProcess(env, feed, encounter('o-4', 'finished', 'o1'));
    expect(await runsOf(ws, `triggerId=${once.triggerId}`)).toHaveLength(2);

    // Once the subject's run is terminal, the next event starts one again.
    const o1 = await findRecordByExtId(env.db, ws.workspaceId, 'Patient', 'o1');
    const live = await env.db.selectFrom('runs').select('id').where('trigger_id', '=', once.triggerId).where('subject_record_id', '=', o1!.id).executeTakeFirstOrThrow();
    expect((await ws.call('POST', `/v1/runs/${live.id}/cancel`)).statusCode).toBe(200);
    await deliverAndProcess(env, feed, encounter('o-5', 'finished', 'o1'));
    expect(await runsOf(ws, `triggerId=${once.triggerId}`)).toHaveLength(3);
  });

  it('makes a stand-in record for an unknown patient, which the Patient resource then fills in', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const trigger = await eventTrigger(ws, 'Encounter.created');
    await deliverAndProcess(env, feed, encounter('u-1', 'planned', 'unknown-7'));
    const standIn = await findRecordByExtId(env.db, ws.workspaceId, 'Patient', 'unknown-7');
    expect(standIn).toMatchObject({ name: 'unknown-7' });
    const run = await env.db.selectFrom('runs').select('subject_record_id').where('trigger_id', '=', trigger.triggerId).executeTakeFirstOrThrow();
    expect(run.subject_record_id).toBe(standIn!.id);

    await deliverAndProcess(env, feed, patient('unknown-7', { name: [{ given: ['Grace'], family: 'Hopper' }] }));
    const filled = await findRecordByExtId(env.db, ws.workspaceId, 'Patient', 'unknown-7');
    expect(filled).toMatchObject({ id: standIn!.id, name: 'Grace Hopper' });
    expect((await lastDelivery(ws, feed)).events).toEqual([{ event: 'Patient.created', count: 1 }]);
  });

  it('gives a deleted resource the subject it had, and removes deleted patients from search', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const trigger = await eventTrigger(ws, 'Encounter.deleted');
    const gone = await eventTrigger(ws, 'Patient.deleted');
    await deliverAndProcess(env, feed, collection(patient('d1'), encounter('d-enc', 'finished', 'd1')));
    const d1 = await findRecordByExtId(env.db, ws.workspaceId, 'Patient', 'd1');
    await deliverAndProcess(env, feed, deletion('Encounter', 'd-enc'));
    const run = await env.db.selectFrom('runs').select(['subject_record_id', 'payload']).where('trigger_id', '=', trigger.triggerId).executeTakeFirstOrThrow();
    expect(run.subject_record_id).toBe(d1!.id);
    expect(JSON.parse(run.payload!).resource).toEqual({ resourceType: 'Encounter', id: 'd-enc' });

    await deliverAndProcess(env, feed, deletion('Patient', 'd1'));
    expect((await search(ws, 'Patient')).total).toBe(0);
    expect(await runsOf(ws, `triggerId=${gone.triggerId}`)).toHaveLength(1);
  });

  it('data that maps to no trigger only keeps search current', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    await eventTrigger(ws, 'Observation.final');
    await deliverAndProcess(env, feed, collection(patient('n1'), { resourceType: 'Practitioner', id: 'dr-n', name: [{ family: 'Who', prefix: ['Dr.'] }] }));
    expect(await runsOf(ws, '')).toHaveLength(0);
    expect((await search(ws, 'Patient')).total).toBe(1);
    expect((await search(ws, 'Practitioner')).results.map((hit) => hit.name)).toEqual(['Who']);
  });

  it('slugs meta.tag codes into tags; an update replaces those and keeps tags set by pathways', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const tagged = (codes: string[]) => patient('tg1', { meta: { tag: codes.map((code) => ({ system: 'http://example.org/tags', code })) } });
    await deliverAndProcess(env, feed, tagged(['High Risk', 'COPD', 'Ünïcode Tag']));
    expect((await search(ws, 'Patient')).results[0].tags).toEqual(['copd', 'high-risk', 'unicode-tag']);

    const record = await findRecordByExtId(env.db, ws.workspaceId, 'Patient', 'tg1');
    await changeTags(env.db, ws.workspaceId, record!.id, ['followup-call'], [], new Date().toISOString());
    await deliverAndProcess(env, feed, tagged(['COPD', 'Diabetes']));
    expect((await search(ws, 'Patient')).results[0].tags).toEqual(['copd', 'diabetes', 'followup-call']);
    expect((await search(ws, 'Patient', [{ op: 'without', tag: 'high-risk' }])).total).toBe(1);
  });

  it('keeps the tags pathways give: on a stand-in when its Patient arrives, and one the resource carried too', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const tagged = (id: string, codes: string[]) => patient(id, { meta: { tag: codes.map((code) => ({ system: 'http://example.org/tags', code })) } });
    const { triggerId } = await webTriggerFor(ws, chain('Flag for a call', [
      { id: 'flag', automations: [{ id: 't', type: 'tag', with: { target: 'subject', add: ['followup-call', 'copd'] } }] },
    ]));
    const flag = async (extId: string) => {
      await fire(ws, triggerId, { subject: { reference: `Patient/${extId}` } });
      await testWorker(env).drain();
    };

    // A stand-in (an Encounter came before its Patient) tagged by a pathway keeps the tag when the
    // Patient resource first arrives; before, that first delivery replaced all of its tags.
    await deliverAndProcess(env, feed, encounter('st-enc', 'planned', 'st1'));
    await flag('st1');
    await deliverAndProcess(env, feed, tagged('st1', ['Diabetes']));
    const standIn = await findRecordByExtId(env.db, ws.workspaceId, 'Patient', 'st1');
    expect(await recordTags(env, standIn!.id)).toEqual(['copd', 'diabetes', 'followup-call']);

    // A tag the resource gave and a pathway then added too is the pathway's: the next delivery
    // without it leaves it. A tag only the resource gave still goes.
    await deliverAndProcess(env, feed, tagged('pv1', ['COPD', 'High Risk']));
    await flag('pv1');
    await deliverAndProcess(env, feed, tagged('pv1', []));
    const record = await findRecordByExtId(env.db, ws.workspaceId, 'Patient', 'pv1');
    expect(await recordTags(env, record!.id)).toEqual(['copd', 'followup-call']);
    expect((await search(ws, 'Patient', [{ op: 'with', tag: 'copd' }])).total).toBe(2);
    const state = await env.db.selectFrom('resource_states').select('source_tags')
      .where('workspace_id', '=', ws.workspaceId).where('resource_type', '=', 'Patient').where('resource_id', '=', 'pv1').executeTakeFirstOrThrow();
    expect(JSON.parse(state.source_tags!)).toEqual([]);
  });
});
