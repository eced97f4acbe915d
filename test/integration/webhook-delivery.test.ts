import { expect, it } from 'vitest';
import { describeEachStore, type TestWorkspace } from '../helpers/test-env.js';
import {
  createEndpoint,
  deliver,
  deliverAndProcess,
  eventTrigger,
  example,
  lastDelivery,
  processorFor,
  runsOf,
  search,
  type Endpoint,
} from '../helpers/deliveries.js';
import { createHash } from 'node:crypto';
import { signPayload } from '../../src/ingestion/signature.js';
import { parsedHandoffFor } from '../../src/modules/deliveries/parsed-handoff.js';

const patient = (id: string, extra: Record<string, unknown> = {}) => ({
  resourceType: 'Patient',
  id,
  name: [{ given: ['Ada'], family: `Lovelace-${id}` }],
  ...extra,
});

describeEachStore('webhook deliveries', (env) => {
  let ws: TestWorkspace;
  let endpoint: Endpoint;

  it('stores the delivery before answering 202 {accepted, idempotencyKey}, and processes it later', async () => {
    ws = await env.workspace();
    endpoint = await createEndpoint(ws);
    const res = await deliver(env, endpoint, { resourceType: 'Bundle', type: 'collection', entry: [{ resource: patient('p1') }, { resource: patient('p2') }] }, { key: 'first' });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json()).toEqual({ accepted: 2, idempotencyKey: 'first' });
    expect(res.json()).not.toHaveProperty('runId');

    // Durable and visible at once, not yet processed: nothing has run the processor.
    const row = await env.db.selectFrom('deliveries').selectAll().where('webhook_id', '=', endpoint.webhookId).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'received', accepted: 2, idempotency_key: 'first', workspace_id: ws.workspaceId });
    expect((await search(ws, 'Patient')).total).toBe(0);
    expect((await lastDelivery(ws, endpoint)).status).toBe('received');

    await processorFor(env).drain();
    const listed = await lastDelivery(ws, endpoint);
    expect(listed).toMatchObject({ status: 'processed', accepted: 2, skippedCount: 0, runsStarted: 0, error: null, idempotencyKey: 'first' });
    expect(listed.processedAt).toEqual(expect.any(String));
    expect((await search(ws, 'Patient')).total).toBe(2);
    // The raw body is not kept once its data is in search.
    const after = await env.db.selectFrom('deliveries').select('body').where('id', '=', listed.deliveryId).executeTakeFirstOrThrow();
    expect(after.body).toBeNull();
  });

  it('audits each applied delivery: the endpoint, the patients\' records, the resources by type, the runs; never the data', async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const body = {
      resourceType: 'Bundle',
      type: 'collection',
      entry: [
        { resource: patient('mrn-audit-1') },
        { resource: { resourceType: 'Observation', id: 'obs-audit', status: 'final', code: { text: 'HbA1c' }, subject: { reference: 'Patient/mrn-audit-1' } } },
        { resource: { resourceType: 'Unicorn', id: 'u' } },
      ],
    };
    await deliverAndProcess(env, feed, body, { key: 'audited', headers: { 'x-request-id': 'req-audited' } });
    const { deliveryId } = await lastDelivery(ws, feed);
    const res = await ws.call('GET', '/v1/audit-events?action=delivery.process');
    expect(res.statusCode).toBe(200);
    const [event] = res.json().data;
    const record = await env.db.selectFrom('records').select('id').where('workspace_id', '=', ws.workspaceId).where('ext_id', '=', 'mrn-audit-1').executeTakeFirstOrThrow();
    expect(event).toMatchObject({
      action: 'delivery.process',
      resourceType: 'delivery',
      resourceId: deliveryId,
      requestId: 'req-audited',
      keyId: null,
      keyName: `webhook:${feed.webhookId}`,
      outcome: 'success',
      details: { webhookId: feed.webhookId, patientRecordIds: [record.id], resources: { Patient: 1, Observation: 1 }, skipped: 1, runsStarted: 0 },
    });
    expect(JSON.stringify(event)).not.toMatch(/mrn-audit-1|HbA1c|Lovelace/);
  });

  it("names a deleted Patient's record in its delivery.process event, as it names every other patient whose data it changed", async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    await deliverAndProcess(env, feed, patient('mrn-del-1'), { key: 'make' });
    const record = await env.db.selectFrom('records').select('id').where('workspace_id', '=', ws.workspaceId).where('ext_id', '=', 'mrn-del-1').executeTakeFirstOrThrow();
    await deliverAndProcess(env, feed, { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: 'Patient/mrn-del-1' } }] }, { key: 'remove' });
    const { deliveryId } = await lastDelivery(ws, feed);
    const event = (await ws.call('GET', '/v1/audit-events?action=delivery.process')).json().data.find((e: { resourceId: string }) => e.resourceId === deliveryId);
    expect(event.details).toMatchObject({ resources: { Patient: 1 }, patientRecordIds: [record.id] });
  });

  it('answers a replay (same key, same bytes) with the first 202 and processes nothing again', async () => {
    const trigger = await eventTrigger(ws, 'Patient.created');
    const body = { resourceType: 'Bundle', type: 'collection', entry: [{ resource: patient('p3') }] };
    const first = await deliverAndProcess(env, endpoint, body, { key: 'replay-me' });
    expect((await runsOf(ws, `triggerId=${trigger.triggerId}`)).length).toBe(1);

    const again = await deliver(env, endpoint, body, { key: 'replay-me' });
    expect(again.statusCode).toBe(202);
    expect(again.json()).toEqual(first);
    expect(again.headers['idempotent-replayed']).toBe('true');
    await processorFor(env).drain();
    const stored = await env.db.selectFrom('deliveries').select('id').where('idempotency_key', '=', 'replay-me').execute();
    expect(stored).toHaveLength(1);
    expect((await runsOf(ws, `triggerId=${trigger.triggerId}`)).length).toBe(1);
  });

  it('takes a signed request sent without a key once: sent again as it was (a replay), it answers the first 202', async () => {
    const trigger = await eventTrigger(ws, 'Patient.updated');
    await deliverAndProcess(env, endpoint, patient('p-signed'));
    const body = JSON.stringify({ ...patient('p-signed'), gender: 'female' });
    const t = Math.floor(env.container.clock.now().getTime() / 1000);
    const signature = signPayload(endpoint.secret, body, t);
    const first = await deliver(env, endpoint, undefined, { raw: body, signature });
    expect(first.statusCode).toBe(202);
    await processorFor(env).drain();
    // The same bytes with the same signature: replayed, never processed twice.
    const replays = await Promise.all(Array.from({ length: 3 }, () => deliver(env, endpoint, undefined, { raw: body, signature })));
    for (const replay of replays) {
      expect(replay.statusCode).toBe(202);
      expect(replay.json()).toEqual(first.json());
      expect(replay.headers['idempotent-replayed']).toBe('true');
    }
    await processorFor(env).drain();
    const bodySha256 = createHash('sha256').update(body).digest('hex');
    const stored = await env.db.selectFrom('deliveries').select('id').where('webhook_id', '=', endpoint.webhookId).where('body_sha256', '=', bodySha256).execute();
    expect(stored).toHaveLength(1);
    expect((await runsOf(ws, `triggerId=${trigger.triggerId}`)).length).toBe(1);
    // Signed again at another second, the same body is a new delivery (the sender means it).
    const later = await deliver(env, endpoint, undefined, { raw: body, signature: signPayload(endpoint.secret, body, t + 1) });
    expect(later.statusCode).toBe(202);
    expect(later.headers['idempotent-replayed']).toBeUndefined();
  });

  it('takes a signed request once whatever key it carries: a copy sent under new keys answers the first 202', async () => {
    const trigger = await eventTrigger(ws, 'Patient.deleted');
    await deliverAndProcess(env, endpoint, patient('p-copied'));
    const body = JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'DELETE', url: 'Patient/p-copied' } }] });
    const signature = signPayload(endpoint.secret, body, Math.floor(env.container.clock.now().getTime() / 1000));
    const first = await deliver(env, endpoint, undefined, { raw: body, signature, key: 'orig-key' });
    expect(first.statusCode, first.body).toBe(202);
    await processorFor(env).drain();
    // The key is not covered by the signature: anyone holding a copy could change it.
    const copies = await Promise.all(['copy-1', 'copy-2', 'orig-key'].map((key) => deliver(env, endpoint, undefined, { raw: body, signature, key })));
    for (const copy of copies) {
      expect(copy.statusCode).toBe(202);
      expect(copy.json()).toEqual({ accepted: 1, idempotencyKey: 'orig-key' });
      expect(copy.headers['idempotent-replayed']).toBe('true');
    }
    await processorFor(env).drain();
    const bodySha256 = createHash('sha256').update(body).digest('hex');
    const stored = await env.db.selectFrom('deliveries').select('idempotency_key').where('webhook_id', '=', endpoint.webhookId).where('body_sha256', '=', bodySha256).execute();
    expect(stored).toEqual([{ idempotency_key: 'orig-key' }]);
    expect((await runsOf(ws, `triggerId=${trigger.triggerId}`)).length).toBe(1);
  });

  it('compares the raw bytes: the same key with another body is 409 idempotency_mismatch', async () => {
    await deliverAndProcess(env, endpoint, patient('p4'), { key: 'k-409' });
    const reordered = JSON.stringify({ id: 'p4', resourceType: 'Patient', name: [{ given: ['Ada'], family: 'Lovelace-p4' }] });
    const res = await deliver(env, endpoint, undefined, { raw: reordered, key: 'k-409' });
    expect(res.statusCode).toBe(409);
    expect(res.json().code).toBe('idempotency_mismatch');
  });

  it('scopes keys per endpoint: another endpoint may use the same key', async () => {
    const other = await createEndpoint(ws);
    const res = await deliver(env, other, patient('p5'), { key: 'k-409' });
    expect(res.statusCode).toBe(202);
  });

  it('stores one delivery for concurrent duplicates', async () => {
    const body = patient('p6');
    const answers = await Promise.all(Array.from({ length: 10 }, () => deliver(env, endpoint, body, { key: 'burst' })));
    expect(answers.map((a) => a.statusCode)).toEqual(Array(10).fill(202));
    const stored = await env.db.selectFrom('deliveries').select('id').where('idempotency_key', '=', 'burst').execute();
    expect(stored).toHaveLength(1);
  });

  it('refuses a bad Idempotency-Key with 400', async () => {
    const res = await deliver(env, endpoint, patient('p7'), { key: 'x'.repeat(256) });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('invalid_request');
  });

  it('takes only application/json or application/fhir+json (415), bodies up to 20 MiB (413), JSON (400) of an accepted shape (400)', async () => {
    const t = Math.floor(env.container.clock.now().getTime() / 1000);
    const text = JSON.stringify(patient('p8'));
    const plain = await env.app.inject({
      method: 'POST',
      url: `/v1/webhooks/${endpoint.webhookId}`,
      headers: { 'content-type': 'text/plain', 'x-service-signature': signPayload(endpoint.secret, text, t) },
      payload: text,
    });
    expect(plain.statusCode).toBe(415);
    expect(plain.json().code).toBe('unsupported_media_type');
    const { gzipSync } = await import('node:zlib');
    const zipped = gzipSync(text);
    const compressed = await deliver(env, endpoint, undefined, { raw: zipped, signature: signPayload(endpoint.secret, zipped, t), headers: { 'content-encoding': 'gzip' } });
    expect(compressed.statusCode).toBe(415);
    expect(compressed.json()).toMatchObject({ code: 'unsupported_media_type', error: 'request bodies are taken uncompressed: send it without Content-Encoding', requestId: expect.any(String) });
    const identity = await deliver(env, endpoint, patient('p8b'), { headers: { 'content-encoding': 'identity' } });
    expect(identity.statusCode).toBe(202);

    const charset = await deliver(env, endpoint, patient('p9'), { headers: { 'content-type': 'application/json; charset=utf-8' } });
    expect(charset.statusCode).toBe(202);
    // Another charset is 415, and bytes that are not UTF-8 are 400, signed or not: a Latin-1
    // name was read as UTF-8 and reached search with replacement characters.
    const latin1 = Buffer.from('{"resourceType": "Patient", "id": "p9b", "name": [{"family": "Muñoz"}]}', 'latin1');
    const otherCharset = await deliver(env, endpoint, undefined, { raw: latin1, signature: signPayload(endpoint.secret, latin1, t), headers: { 'content-type': 'application/json; charset=iso-8859-1' } });
    expect(otherCharset.statusCode).toBe(415);
    expect(otherCharset.json()).toMatchObject({ code: 'unsupported_media_type', error: expect.stringContaining('UTF-8') });
    const notUtf8 = await deliver(env, endpoint, undefined, { raw: latin1, signature: signPayload(endpoint.secret, latin1, t) });
    expect(notUtf8.statusCode).toBe(400);
    expect(notUtf8.json()).toMatchObject({ code: 'invalid_request', error: expect.stringContaining('not valid UTF-8') });
    // Who sent it comes first: without the secret, 401 whatever its charset.
    const unsigned = await deliver(env, endpoint, undefined, { raw: latin1, signature: 't=1,v1=00', headers: { 'content-type': 'application/json; charset=iso-8859-1' } });
    expect(unsigned.statusCode).toBe(401);
    // A retry under a key already taken is a replay, whatever its bytes (as for a body of another shape).
    expect((await deliver(env, endpoint, patient('p9c'), { key: 'utf8-replay' })).statusCode).toBe(202);
    const replay = await deliver(env, endpoint, undefined, { raw: latin1, key: 'utf8-replay', signature: signPayload(endpoint.secret, latin1, t) });
    expect(replay.statusCode).toBe(409);
    expect(replay.json().code).toBe('idempotency_mismatch');
    // FHIR's media type, as an EHR's subscription sends it.
    const fhir = await deliver(env, endpoint, patient('p10'), { headers: { 'content-type': 'application/fhir+json; fhirVersion=4.0' } });
    expect(fhir.statusCode).toBe(202);

    const big = Buffer.alloc(20 * 1024 * 1024 + 1, 0x20);
    const tooBig = await deliver(env, endpoint, undefined, { raw: big, signature: 't=1,v1=00' });
    expect(tooBig.statusCode).toBe(413);
    expect(tooBig.json().code).toBe('payload_too_large');
    expect(tooBig.json().error).toBe('request body is too large: at most 20 MiB (20971520 bytes) here');

    for (const raw of ['{"resourceType": "Patient",', '', '[1, 2]', '"text"', '{"hello": "world"}', '{"resourceType": "Bundle", "entry": {}}']) {
      const res = await deliver(env, endpoint, undefined, { raw });
      expect(res.statusCode, raw).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    const proto = await deliver(env, endpoint, undefined, { raw: '{"resourceType": "Patient", "id": "x", "__proto__": {"admin": true}}' });
    expect(proto.statusCode).toBe(400);
  });

  it('takes every accepted body shape: resource, Bundle, {resourceType, bundle}, plain records', async () => {
    const own = await env.workspace();
    const feed = await createEndpoint(own);
    const shapes: [unknown, number][] = [
      [patient('s1'), 1],
      [{ resourceType: 'Bundle', type: 'transaction', entry: [{ resource: patient('s2'), request: { method: 'PUT', url: 'Patient/s2' } }] }, 1],
      [{ resourceType: 'Bundle', bundle: { resourceType: 'Bundle', type: 'collection', entry: [{ resource: patient('s3') }] } }, 1],
      [{ resourceType: 'Patient', extId: 's4', name: 'Plain Record', tags: ['vip'] }, 1],
      [{ records: [{ resourceType: 'Practitioner', extId: 'dr-1', name: 'Dr. One', tags: [] }, { resourceType: 'Patient', extId: 's5', name: 'Five' }] }, 2],
    ];
    for (const [body, accepted] of shapes) {
      const res = await deliver(env, feed, body);
      expect(res.statusCode, res.body).toBe(202);
      expect(res.json().accepted).toBe(accepted);
    }
    await processorFor(env).drain();
    expect((await search(own, 'Patient')).results.map((hit) => hit.extId).sort()).toEqual(['s1', 's2', 's3', 's4', 's5']);
    expect((await search(own, 'Patient', [{ op: 'with', tag: 'vip' }])).results.map((hit) => hit.name)).toEqual(['Plain Record']);
    expect((await search(own, 'Practitioner')).results.map((hit) => hit.name)).toEqual(['Dr. One']);
  });

  it('lists deliveries newest first with {data, nextCursor}, pages, and needs webhooks:read', async () => {
    const own = await env.workspace();
    const feed = await createEndpoint(own);
    for (let i = 0; i < 3; i++) await deliver(env, feed, patient(`l${i}`), { key: `list-${i}` });
    await deliver(env, feed, { resourceType: 'Bundle', type: 'collection', entry: [{ resource: { resourceType: 'Patient', id: 'bad', gender: 'robot' } }] }, { key: 'list-3' });
    await processorFor(env).drain();

    const page1 = await own.call('GET', `/v1/webhooks/${feed.webhookId}/deliveries?limit=2`);
    expect(page1.statusCode).toBe(200);
    expect(page1.json().data.map((d: { idempotencyKey: string }) => d.idempotencyKey)).toEqual(['list-3', 'list-2']);
    const newest = page1.json().data[0];
    expect(Object.keys(newest).sort()).toEqual(
      ['accepted', 'attempts', 'deliveryId', 'error', 'events', 'idempotencyKey', 'processedAt', 'receivedAt', 'runsStarted', 'skipped', 'skippedCount', 'status'].sort(),
    );
    expect(newest).toMatchObject({ status: 'processed', accepted: 1, skippedCount: 1, events: [] });
    // Which entry and what rule, never the value it carried.
    expect(newest.skipped).toEqual([{ index: 0, message: '/gender: must be one of male, female, other, unknown (enum)' }]);
    expect(JSON.stringify(newest)).not.toContain('robot');

    const page2 = await own.call('GET', `/v1/webhooks/${feed.webhookId}/deliveries?limit=2&cursor=${page1.json().nextCursor}`);
    expect(page2.json().data.map((d: { idempotencyKey: string }) => d.idempotencyKey)).toEqual(['list-1', 'list-0']);
    expect(page2.json().nextCursor).toBeNull();
    expect(page2.json().data[1].events).toEqual([{ event: 'Patient.created', count: 1 }]);

    expect((await ws.call('GET', `/v1/webhooks/${feed.webhookId}/deliveries`)).statusCode).toBe(404);
    const narrow = await own.keyWith(['search:read']);
    const denied = await own.call('GET', `/v1/webhooks/${feed.webhookId}/deliveries`, { key: narrow.key });
    expect(denied.statusCode).toBe(403);
    const reader = await own.keyWith(['webhooks:read']);
    expect((await own.call('GET', `/v1/webhooks/${feed.webhookId}/deliveries`, { key: reader.key })).statusCode).toBe(200);
    expect((await own.call('GET', `/v1/webhooks/${feed.webhookId}/deliveries?cursor=nope`)).statusCode).toBe(400);
  });

  it('processes from the parse handed over in memory when a processor runs here, else from the stored bytes, alike', async () => {
    const own = await env.workspace();
    const feed = await createEndpoint(own);
    const handoff = parsedHandoffFor(env.container.db);
    // What a running processor does in `carepath serve`: the intake then keeps its parses.
    handoff.attach();
    try {
      const body = (id: string) => ({
        resourceType: 'Bundle',
        type: 'collection',
        entry: [{ resource: patient(id, { meta: { tag: [{ code: 'VIP' }] } }) }, { resource: { resourceType: 'Patient' } }, 'not an entry'],
      });
      expect((await deliver(env, feed, body('h1'), { key: 'handed-1' })).statusCode).toBe(202);
      expect((await deliver(env, feed, body('h2'), { key: 'handed-2' })).statusCode).toBe(202);
      const rows = await env.db.selectFrom('deliveries').select(['id', 'idempotency_key']).where('webhook_id', '=', feed.webhookId).orderBy('id').execute();
      expect(rows.map((row) => handoff.has(row.id))).toEqual([true, true]);
      // The second one's parse is gone (as when it was evicted): it is read from the store.
      handoff.take(rows[1].id);

      await processorFor(env).drain();
      expect(rows.map((row) => handoff.has(row.id))).toEqual([false, false]);
      const listed = (await own.call('GET', `/v1/webhooks/${feed.webhookId}/deliveries`)).json().data;
      for (const delivery of listed) {
        expect(delivery).toMatchObject({ status: 'processed', accepted: 1, skippedCount: 2, events: [{ event: 'Patient.created', count: 1 }] });
        expect(delivery.skipped.map((problem: { index: number }) => problem.index)).toEqual([1, 2]);
      }
      expect((await search(own, 'Patient', [{ op: 'with', tag: 'vip' }])).results.map((hit) => hit.extId).sort()).toEqual(['h1', 'h2']);
      const bodies = await env.db.selectFrom('deliveries').select('body').where('webhook_id', '=', feed.webhookId).execute();
      expect(bodies.map((row) => row.body)).toEqual([null, null]);
    } finally {
      handoff.detach();
    }
  });

  it('delivers the HL7 transaction example as the sending system would', async () => {
    const own = await env.workspace();
    const feed = await createEndpoint(own);
    const res = await deliverAndProcess(env, feed, example('Bundle-bundle-transaction.json'), { key: 'tx-example' });
    expect(res.accepted).toBeGreaterThan(0);
    const listed = await lastDelivery(own, feed);
    expect(listed.status).toBe('processed');
    expect(listed.events.length).toBeGreaterThan(0);
  });
});
