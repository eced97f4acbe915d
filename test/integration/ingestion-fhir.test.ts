import { readdirSync } from 'node:fs';
import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import {
  EXAMPLES,
  bundle,
  createEndpoint,
  deliver,
  deliverAndProcess,
  eventTrigger,
  example,
  hasSynthea,
  lastDelivery,
  processorFor,
  runsOf,
  search,
  syntheaResources,
  validator,
  type Resource,
} from '../helpers/deliveries.js';
import { parseDeliveryBody } from '../../src/ingestion/delivery-body.js';

const examplesOf = (type: string): Resource[] =>
  readdirSync(EXAMPLES)
    .filter((file) => file.startsWith(`${type}-`) && file.endsWith('.json'))
    .sort()
    .map(example);

describeEachStore('FHIR R4 ingestion of real data', (env) => {
  it('ingests every HL7 Patient and Practitioner example into search, named from the first HumanName', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const patients = examplesOf('Patient');
    const practitioners = examplesOf('Practitioner');
    const answer = await deliverAndProcess(env, feed, bundle([...patients, ...practitioners]));
    expect(answer.accepted).toBe(patients.length + practitioners.length);
    expect(await lastDelivery(ws, feed)).toMatchObject({ status: 'processed', skippedCount: 0 });

    const found = await search(ws, 'Patient');
    expect(found.total).toBe(new Set(patients.map((p) => p.id)).size);
    const chalmers = found.results.find((hit) => hit.extId === 'example');
    expect(chalmers?.name).toBe('Peter James Chalmers');
    expect((await search(ws, 'Practitioner')).total).toBe(new Set(practitioners.map((p) => p.id)).size);
  }, 120_000);

  it('processes every HL7 Bundle example: accepted entries go on, invalid ones are skipped and reported', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const files = readdirSync(EXAMPLES).filter((file) => file.startsWith('Bundle-') && file.endsWith('.json')).sort();
    expect(files.length).toBeGreaterThan(40);
    const expected = new Map<string, { accepted: number; parseProblems: number; invalid: number }>();
    let tooLarge = 0;
    for (const file of files) {
      const body = example(file);
      if (Buffer.byteLength(JSON.stringify(body)) > 20 * 1024 * 1024) {
        // The definitional bundles of the whole specification exceed the 20 MiB delivery limit.
        expect((await deliver(env, feed, body)).statusCode, file).toBe(413);
        tooLarge++;
        continue;
      }
      const parsed = parseDeliveryBody(body);
      const invalid = parsed.items.filter((item) => item.kind === 'resource' && !item.deleted && !validator().validate(item.resource).valid).length;
      expected.set(file, { accepted: parsed.items.length, parseProblems: parsed.problems.length, invalid });
      const res = await deliver(env, feed, body, { key: file });
      expect(res.statusCode, file).toBe(202);
      expect(res.json().accepted, file).toBe(parsed.items.length);
    }
    await processorFor(env).drain();
    const listed = (await runsAll(ws, feed.webhookId)) as { idempotencyKey: string; status: string; skippedCount: number; error: null }[];
    expect(listed).toHaveLength(files.length - tooLarge);
    expect(tooLarge).toBeLessThan(5);
    let skippedSomewhere = 0;
    for (const delivery of listed) {
      const want = expected.get(delivery.idempotencyKey)!;
      expect(delivery.status, delivery.idempotencyKey).toBe('processed');
      expect(delivery.error).toBeNull();
      expect(delivery.skippedCount, delivery.idempotencyKey).toBe(want.parseProblems + want.invalid);
      skippedSomewhere += want.invalid;
    }
    // Some of the definitional bundles carry resources the R4 schema refuses.
    expect(skippedSomewhere).toBeGreaterThan(0);
  }, 300_000);

  it('skips invalid resources and unknown types with their index and rule, and processes the rest', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const good = example('Patient-example.json');
    const body = bundle([
      { ...good, id: 'ok-1' },
      { ...good, id: 'bad-date', birthDate: '1974-13-45' },
      { resourceType: 'Spaceship', id: 'enterprise' },
      { ...good, id: 'bad-element', favouriteColour: 'blue' },
      { ...example('Encounter-example.json'), id: 'enc-ok', subject: { reference: 'Patient/ok-1' } },
      { ...good, id: 'many-tags', meta: { tag: Array.from({ length: 101 }, (_, n) => ({ code: `t${n}` })) } },
      // 150 codes, 100 tags once slugged (T0 and t0 are one): taken.
      { ...good, id: 'ok-100', meta: { tag: [...Array.from({ length: 100 }, (_, n) => ({ code: `t${n}` })), ...Array.from({ length: 50 }, (_, n) => ({ code: `T${n}` }))] } },
    ]);
    (body.entry as object[]).push({ request: { method: 'DELETE', url: 'Starship/x' } }, { request: { method: 'DELETE', url: 'Patient?name=x' } });
    const answer = await deliverAndProcess(env, feed, body);
    expect(answer.accepted).toBe(8);
    const delivery = await lastDelivery(ws, feed);
    expect(delivery.skipped).toEqual([
      { index: 1, message: '/birthDate: must be a valid FHIR date (pattern)' },
      { index: 2, message: 'unknown FHIR resource type Spaceship' },
      { index: 3, message: '/favouriteColour: is not an element of this type (additionalProperties)' },
      { index: 5, message: 'meta.tag gives 101 tags; a Patient may carry at most 100 (they become its search tags)' },
      { index: 7, message: 'unknown FHIR resource type Starship' },
      { index: 8, message: 'conditional DELETE (request.url with a search) is not supported' },
    ]);
    expect(JSON.stringify(delivery)).not.toMatch(/1974-13-45|blue|enterprise/);
    expect((await search(ws, 'Patient')).results.map((hit) => hit.extId).sort()).toEqual(['ok-1', 'ok-100']);
    expect(delivery.events).toEqual([
      { event: 'Encounter.created', count: 1 },
      { event: 'Encounter.in-progress', count: 1 },
      { event: 'Patient.created', count: 2 },
    ]);
  });

  it('skips what a Bundle carries that is not data: a search outcome, an operation call', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const good = example('Patient-example.json');
    const outcome = { resourceType: 'OperationOutcome', id: 'oo-1', issue: [{ severity: 'information', code: 'informational' }] };
    const lookup = { resourceType: 'Parameters', id: 'lookup-1', parameter: [{ name: 'code', valueCode: 'x' }] };
    const body = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { resource: { ...good, id: 'tx-p' }, request: { method: 'PUT', url: 'Patient/tx-p' } },
        { resource: lookup, request: { method: 'POST', url: 'ValueSet/$lookup' } },
        {
          resource: {
            resourceType: 'Bundle',
            type: 'searchset',
            entry: [
              { resource: { ...good, id: 'found-p' }, search: { mode: 'match' } },
              { resource: outcome, search: { mode: 'outcome' } },
            ],
          },
        },
      ],
    };
    await deliverAndProcess(env, feed, body);
    const delivery = await lastDelivery(ws, feed);
    expect(delivery.skipped).toEqual([
      { index: 1, message: 'operation call (request.url names a $operation), not data: not applied' },
      { index: 3, message: 'search outcome entry (about the search, not data): not applied' },
    ]);
    expect(delivery.events).toEqual([{ event: 'Patient.created', count: 2 }]);
  });

  it('refuses a body that is one resource of an unknown type (400); in a Bundle such an entry is skipped', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const refused = await deliver(env, feed, { resourceType: 'Unicorn', id: 'u1' });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ code: 'invalid_request', error: '"resourceType" Unicorn is not a FHIR R4 resource type', requestId: expect.any(String) });
    expect(await env.db.selectFrom('deliveries').select('id').where('webhook_id', '=', feed.webhookId).execute()).toEqual([]);
    const answer = await deliverAndProcess(env, feed, { resourceType: 'Bundle', type: 'collection', entry: [{ resource: { resourceType: 'Unicorn', id: 'u1' } }] });
    expect(answer.accepted).toBe(1);
    expect(await lastDelivery(ws, feed)).toMatchObject({ status: 'processed', skippedCount: 1, skipped: [{ index: 0, message: 'unknown FHIR resource type Unicorn' }] });
  });

  it('refuses text no store keeps (U+0000, unpaired surrogates): a body of one item 400, a Bundle entry skipped', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    // PostgreSQL used to answer 202, then fail such a delivery for good; SQLite kept the text.
    for (const [body, where] of [
      [{ resourceType: 'Patient', extId: 'nul-1', name: 'a\u0000b', tags: ['a'] }, 'record.name'],
      [{ ...example('Patient-example.json'), id: 'nul-2', name: [{ family: 'Chalmers\u0000' }] }, 'resource.name[0].family'],
    ] as const) {
      const refused = await deliver(env, feed, body);
      expect(refused.statusCode, refused.body).toBe(400);
      expect(refused.json().error).toContain(`${where} holds the character U+0000 or an unpaired UTF-16 surrogate`);
    }
    expect(await env.db.selectFrom('deliveries').select('id').where('webhook_id', '=', feed.webhookId).execute()).toEqual([]);

    const good = example('Patient-example.json');
    const answer = await deliverAndProcess(env, feed, bundle([
      { ...good, id: 'text-ok' },
      { ...good, id: 'text-nul', name: [{ family: 'Chalmers\u0000' }] },
      { ...good, id: 'text-lone', name: [{ given: ['\udc00'] }] },
    ]));
    expect(answer.accepted).toBe(1);
    const plain = await deliverAndProcess(env, feed, { records: [{ resourceType: 'Patient', extId: 'a\ud800b', name: 'x' }, { resourceType: 'Patient', extId: 'plain-ok', name: 'Plain' }] });
    expect(plain.accepted).toBe(1);
    expect(await lastDelivery(ws, feed)).toMatchObject({
      status: 'processed',
      skipped: [{ index: 0, message: 'record.extId holds the character U+0000 or an unpaired UTF-16 surrogate (\\ud800-\\udfff), which is not text that can be stored' }],
    });
    expect((await search(ws, 'Patient')).results.map((hit) => hit.extId).sort()).toEqual(['plain-ok', 'text-ok']);
  });

  it('refuses numbers beyond a double (1e400): a body of one item 400, a Bundle entry skipped, never applied as null', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const observation = (id: string, value: string) =>
      `{"resourceType": "Observation", "id": "${id}", "status": "final", "code": {"text": "HbA1c"}, "subject": {"reference": "Patient/big-1"}, "valueQuantity": {"value": ${value}, "unit": "%"}}`;
    const refused = await deliver(env, feed, undefined, { raw: observation('obs-big', '1e400') });
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().error).toContain('resource.valueQuantity.value is a number beyond what a double holds (±1.8e308)');
    expect(await env.db.selectFrom('deliveries').select('id').where('webhook_id', '=', feed.webhookId).execute()).toEqual([]);

    const entries = [observation('obs-ok', '9.5'), observation('obs-huge', '9e999')].map((resource) => `{"resource": ${resource}}`);
    const answer = await deliverAndProcess(env, feed, undefined, { raw: `{"resourceType": "Bundle", "type": "collection", "entry": [${entries.join(',')}]}` });
    expect(answer.accepted).toBe(1);
    expect(await lastDelivery(ws, feed)).toMatchObject({
      status: 'processed',
      skippedCount: 1,
      skipped: [{ index: 1, message: expect.stringContaining('resource.valueQuantity.value is a number beyond what a double holds') }],
    });
    const states = await env.db.selectFrom('resource_states').select('resource_id').where('workspace_id', '=', ws.workspaceId).where('resource_type', '=', 'Observation').execute();
    expect(states.map((row) => row.resource_id)).toEqual(['obs-ok']);
  });

  it('survives deep nesting: a resource nested deeper than 100 levels is skipped; bundles nest two deep at most', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    // 51 nestings are 104 levels; 1,500 passed the schema on the reader's thread and became a
    // run payload the serving thread could not write; 50,000 overflowed the schema's stack.
    for (const depth of [51, 1_500, 50_000]) {
      const deep =
        `{"resourceType":"Basic","id":"deep-${depth}","code":{"text":"deep"},"extension":[` +
        '{"url":"http://example.org/x","extension":['.repeat(depth) +
        '{"url":"http://example.org/x","valueString":"leaf"}' +
        ']}'.repeat(depth) +
        ']}';
      const raw = `{"resourceType":"Bundle","type":"collection","entry":[{"resource":${JSON.stringify({ resourceType: 'Patient', id: 'shallow' })}},{"resource":${deep}}]}`;
      const res = await deliver(env, feed, undefined, { raw });
      expect(res.statusCode, res.body).toBe(202);
      await processorFor(env).drain();
      expect(await lastDelivery(ws, feed)).toMatchObject({
        status: 'processed',
        skipped: [{ index: 1, message: 'resource nests objects and arrays deeper than 100 levels' }],
      });
    }
    expect((await search(ws, 'Patient')).total).toBe(1);

    const nested = (level: number): Resource =>
      level === 0 ? { resourceType: 'Patient', id: 'inner' } : { resourceType: 'Bundle', type: 'collection', entry: [{ resource: nested(level - 1) }] };
    expect((await deliver(env, feed, nested(2))).statusCode).toBe(202);
    const tooDeep = await deliver(env, feed, nested(3));
    expect(tooDeep.statusCode).toBe(400);
    expect(tooDeep.json().error).toMatch(/nest at most 2/);
  });

  it('ingests a 10,000-entry bundle: states, events and one run per patient (onePerSubject)', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const trigger = await eventTrigger(ws, 'Observation.final', { onePerSubject: true });
    const patients = Array.from({ length: 100 }, (_, i) => ({ resourceType: 'Patient', id: `bulk-${i}`, name: [{ family: `Bulk ${i}` }] }));
    const observations = Array.from({ length: 9_900 }, (_, i) => ({
      resourceType: 'Observation',
      id: `obs-${i}`,
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
      subject: { reference: `Patient/bulk-${i % 100}` },
      valueQuantity: { value: 60 + (i % 40), unit: 'beats/minute' },
    }));
    const started = Date.now();
    const answer = await deliverAndProcess(env, feed, bundle([...patients, ...observations]), { key: 'bulk' });
    const elapsed = Date.now() - started;
    expect(answer.accepted).toBe(10_000);
    const delivery = await lastDelivery(ws, feed);
    expect(delivery).toMatchObject({ status: 'processed', skippedCount: 0, runsStarted: 100 });
    expect(delivery.events).toEqual([
      { event: 'Observation.created', count: 9_900 },
      { event: 'Observation.final', count: 9_900 },
      { event: 'Patient.created', count: 100 },
    ]);
    expect((await search(ws, 'Patient')).total).toBe(100);
    const runs = await runsOf(ws, `triggerId=${trigger.triggerId}`);
    expect(runs).toHaveLength(100);
    const subjects = await env.db.selectFrom('runs').select('subject_record_id').distinct().where('trigger_id', '=', trigger.triggerId).execute();
    expect(subjects).toHaveLength(100);
    const states = await env.db.selectFrom('resource_states').select((eb) => eb.fn.countAll<number>().as('n')).where('workspace_id', '=', ws.workspaceId).executeTakeFirstOrThrow();
    expect(Number(states.n)).toBe(10_000);
    expect(elapsed).toBeLessThan(60_000);
  }, 120_000);

  it.skipIf(!hasSynthea)('ingests the Synthea set, one bundle per patient, with every resource valid R4', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const finished = await eventTrigger(ws, 'Encounter.finished', { onePerSubject: true });
    const patients = syntheaResources('Patient');
    const shared = ['Organization', 'Location', 'Practitioner'].flatMap(syntheaResources);
    const clinical = ['Encounter', 'Condition', 'Procedure', 'Immunization', 'MedicationRequest', 'AllergyIntolerance'].flatMap(syntheaResources);
    const patientOf = (resource: Resource) =>
      /Patient\/([^/]+)$/.exec(String((resource.subject as { reference?: string } | undefined)?.reference ?? (resource.patient as { reference?: string } | undefined)?.reference ?? ''))?.[1];

    await deliverAndProcess(env, feed, bundle(shared), { key: 'synthea-shared' });
    for (const patient of patients) {
      const own = clinical.filter((resource) => patientOf(resource) === patient.id);
      const res = await deliver(env, feed, bundle([patient, ...own], 'transaction'), { key: `synthea-${patient.id}` });
      expect(res.statusCode).toBe(202);
      expect(res.json().accepted).toBe(1 + own.length);
    }
    await processorFor(env).drain();

    const deliveries = (await runsAll(ws, feed.webhookId)) as { status: string; skippedCount: number }[];
    expect(deliveries).toHaveLength(patients.length + 1);
    expect(deliveries.every((d) => d.status === 'processed' && d.skippedCount === 0)).toBe(true);
    expect((await search(ws, 'Patient')).total).toBe(patients.length);
    expect((await search(ws, 'Practitioner')).total).toBe(syntheaResources('Practitioner').length);

    const withFinished = new Set(syntheaResources('Encounter').filter((e) => e.status === 'finished').map(patientOf));
    expect(await runsOf(ws, `triggerId=${finished.triggerId}`)).toHaveLength(withFinished.size);
  }, 300_000);
});

/** Every delivery of an endpoint, through the listing. */
async function runsAll(ws: Awaited<ReturnType<import('../helpers/test-env.js').TestEnv['workspace']>>, webhookId: string) {
  const all = [];
  let cursor: string | null = null;
  do {
    const res = await ws.call('GET', `/v1/webhooks/${webhookId}/deliveries?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
    all.push(...res.json().data);
    cursor = res.json().nextCursor;
  } while (cursor);
  return all;
}
