/**
 * Idempotency-Key on the creates of set-up resources (modules/idempotency/create-keys.ts): a
 * provisioning script's retry after a timeout makes nothing twice.
 */
import { expect, it } from 'vitest';
import { describeEachStore, simpleBlueprint, type TestWorkspace } from '../helpers/test-env.js';

describeEachStore('idempotent creates', (env) => {
  async function eventTriggerBody(ws: TestWorkspace) {
    const blueprint = await ws.importBlueprint(simpleBlueprint('Keyed'));
    return { name: 'On final labs', sourceId: blueprint.id, type: 'event', event: 'Observation.final' };
  }
  const keyed = (key: string) => ({ 'idempotency-key': key });
  const countOf = async (table: 'triggers' | 'queries' | 'webhooks', workspaceId: string) =>
    (await env.db.selectFrom(table).select('id').where('workspace_id', '=', workspaceId).execute()).length;
  const auditOf = async (workspaceId: string, action: string) =>
    (await env.db.selectFrom('audit_events').select('resource_id').where('workspace_id', '=', workspaceId).where('action', '=', action).execute()).length;

  it('a trigger created again with the same key and body is the first one (200, Idempotent-Replayed), made once and audited once', async () => {
    const ws = await env.workspace();
    const body = await eventTriggerBody(ws);
    const first = await ws.call('POST', '/v1/triggers', { body, headers: keyed('provision-1') });
    expect(first.statusCode, first.body).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await ws.call('POST', '/v1/triggers', { body, headers: keyed('provision-1') });
    expect(again.statusCode).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    expect(await countOf('triggers', ws.workspaceId)).toBe(1);
    expect(await auditOf(ws.workspaceId, 'trigger.create')).toBe(1);
    // What it made as it is now: a change since shows.
    await ws.call('PATCH', `/v1/triggers/${first.json().triggerId}`, { body: { name: 'Renamed' } });
    expect((await ws.call('POST', '/v1/triggers', { body, headers: keyed('provision-1') })).json()).toMatchObject({ triggerId: first.json().triggerId, name: 'Renamed' });
    // Deleted since: the retry is told so, and nothing is made.
    await ws.call('DELETE', `/v1/triggers/${first.json().triggerId}`);
    const gone = await ws.call('POST', '/v1/triggers', { body, headers: keyed('provision-1') });
    expect(gone.statusCode).toBe(404);
    expect(gone.json()).toMatchObject({ code: 'not_found', requestId: expect.any(String) });
    expect(gone.headers['idempotent-replayed']).toBeUndefined();
    expect(await countOf('triggers', ws.workspaceId)).toBe(1);
  });

  it('the same key with another body, or a key a fire used, is 409 idempotency_mismatch and makes nothing', async () => {
    const ws = await env.workspace();
    const body = await eventTriggerBody(ws);
    expect((await ws.call('POST', '/v1/triggers', { body, headers: keyed('k-1') })).statusCode).toBe(201);
    const other = await ws.call('POST', '/v1/triggers', { body: { ...body, name: 'Another' }, headers: keyed('k-1') });
    expect(other.statusCode).toBe(409);
    expect(other.json()).toMatchObject({ code: 'idempotency_mismatch', requestId: expect.any(String) });
    // The key of a trigger create is not a query create's, nor a fire's.
    const query = await ws.call('POST', '/v1/queries', { body: { name: 'Q', resourceType: 'Patient' }, headers: keyed('k-1') });
    expect(query.statusCode).toBe(409);
    const web = await ws.call('POST', '/v1/triggers', { body: { name: 'Web', sourceId: body.sourceId, type: 'web' } });
    const fired = await ws.call('POST', `/v1/triggers/${web.json().triggerId}`, { body: {}, headers: keyed('k-1') });
    expect(fired.statusCode).toBe(409);
    expect((await ws.call('POST', `/v1/triggers/${web.json().triggerId}`, { body: {}, headers: keyed('fired-1') })).statusCode).toBe(201);
    const reused = await ws.call('POST', '/v1/triggers', { body, headers: keyed('fired-1') });
    expect(reused.statusCode).toBe(409);
    expect(await countOf('triggers', ws.workspaceId)).toBe(2);
    expect(await countOf('queries', ws.workspaceId)).toBe(0);
  });

  it('concurrent creates with one key make one trigger and all answer it', async () => {
    const ws = await env.workspace();
    const body = await eventTriggerBody(ws);
    const answers = await Promise.all(Array.from({ length: 12 }, () => ws.call('POST', '/v1/triggers', { body, headers: keyed('together') })));
    expect(answers.filter((a) => a.statusCode === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.statusCode === 200 && a.headers['idempotent-replayed'] === 'true')).toHaveLength(11);
    expect(new Set(answers.map((a) => a.json().triggerId)).size).toBe(1);
    expect(await countOf('triggers', ws.workspaceId)).toBe(1);
    expect(await auditOf(ws.workspaceId, 'trigger.create')).toBe(1);
  });

  it('a webhook endpoint replayed is answered without its secret: the secret is shown once', async () => {
    const ws = await env.workspace();
    const first = await ws.call('POST', '/v1/webhooks', { body: { name: 'EHR feed' }, headers: keyed('hook-1') });
    expect(first.statusCode).toBe(201);
    expect(first.json().secret).toEqual(expect.any(String));
    const again = await ws.call('POST', '/v1/webhooks', { body: { name: 'EHR feed' }, headers: keyed('hook-1') });
    expect(again.statusCode).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    const { secret: _secret, ...view } = first.json();
    expect(again.json()).toEqual(view);
    expect(again.body).not.toContain(first.json().secret);
    expect(await countOf('webhooks', ws.workspaceId)).toBe(1);
  });

  it('a saved query replayed is the first one; the key is the workspace\'s own', async () => {
    const ws = await env.workspace();
    const other = await env.workspace();
    const body = { name: 'COPD', resourceType: 'Patient', filters: [{ op: 'with', tag: 'copd' }] };
    const first = await ws.call('POST', '/v1/queries', { body, headers: keyed('q-1') });
    const again = await ws.call('POST', '/v1/queries', { body, headers: keyed('q-1') });
    expect([first.statusCode, again.statusCode]).toEqual([201, 200]);
    expect(again.json().queryId).toBe(first.json().queryId);
    // Another workspace's same key is its own request.
    const theirs = await other.call('POST', '/v1/queries', { body, headers: keyed('q-1') });
    expect(theirs.statusCode).toBe(201);
    expect(theirs.json().queryId).not.toBe(first.json().queryId);
  });

  it('a create that fails claims nothing, and a bad key is 400', async () => {
    const ws = await env.workspace();
    const body = await eventTriggerBody(ws);
    const missing = await ws.call('POST', '/v1/triggers', { body: { ...body, sourceId: '00000000-0000-4000-8000-000000000000' }, headers: keyed('fix-me') });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().code).toBe('invalid_request');
    expect((await ws.call('POST', '/v1/triggers', { body, headers: keyed('fix-me') })).statusCode).toBe(201);
    for (const key of ['', 'x'.repeat(256), 'café']) {
      const bad = await ws.call('POST', '/v1/queries', { body: { name: 'Q', resourceType: 'Patient' }, headers: keyed(key) });
      expect(bad.statusCode, key).toBe(400);
      expect(bad.json()).toMatchObject({ code: 'invalid_request', requestId: expect.any(String) });
    }
    expect(await countOf('queries', ws.workspaceId)).toBe(0);
  });

  it('the OpenAPI document names the header and the replay on each keyed create', async () => {
    const ws = await env.workspace();
    const doc = (await ws.call('GET', '/v1/openapi.json')).json();
    for (const [path, id] of [['/v1/triggers', 'createTrigger'], ['/v1/queries', 'createQuery'], ['/v1/webhooks', 'createWebhook']]) {
      const operation = doc.paths[path].post;
      expect(operation.operationId).toBe(id);
      expect(operation.parameters.some((p: { name: string; in: string }) => p.in === 'header' && /^idempotency-key$/i.test(p.name))).toBe(true);
      expect(operation.responses['200'].headers['Idempotent-Replayed']).toBeDefined();
      expect(operation.responses['409']).toBeDefined();
    }
  });
});
