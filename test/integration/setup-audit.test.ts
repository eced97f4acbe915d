import { expect, it } from 'vitest';
import { describeEachStore, simpleBlueprint, type TestWorkspace } from '../helpers/test-env.js';

/** The workspace's audit events of one kind of set-up, oldest first. */
async function auditOf(ws: TestWorkspace, kind: 'trigger' | 'query' | 'webhook') {
  const all = [];
  for (const action of ['create', 'update', 'delete']) {
    const res = await ws.call('GET', `/v1/audit-events?action=${kind}.${action}&limit=100`);
    expect(res.statusCode).toBe(200);
    all.push(...res.json().data);
  }
  return all.sort((a, b) => (a.id < b.id ? -1 : 1));
}

async function call(ws: TestWorkspace, method: 'POST' | 'PATCH' | 'DELETE', url: string, requestId: string, body?: unknown) {
  return ws.call(method, url, { body, headers: { 'x-request-id': requestId } });
}

describeEachStore('set-up changes through the API are audited', (env) => {
  it('triggers: create, update and delete, each with the request id, the key, and what was set', async () => {
    const ws = await env.workspace();
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const created = await call(ws, 'POST', '/v1/triggers', 'req-create', {
      name: 'Lab follow-up',
      sourceId: blueprint.id,
      type: 'event',
      event: 'Observation.final',
    });
    expect(created.statusCode, created.body).toBe(201);
    const { triggerId } = created.json();
    expect((await call(ws, 'PATCH', `/v1/triggers/${triggerId}`, 'req-update', { active: false, name: 'Lab follow-up (paused)' })).statusCode).toBe(200);
    expect((await call(ws, 'DELETE', `/v1/triggers/${triggerId}`, 'req-delete')).statusCode).toBe(204);

    const events = await auditOf(ws, 'trigger');
    expect(events.map((e) => e.action)).toEqual(['trigger.create', 'trigger.update', 'trigger.delete']);
    for (const event of events) {
      expect(event).toMatchObject({ keyId: ws.keyId, keyName: 'test key', resourceType: 'trigger', resourceId: triggerId, outcome: 'success' });
    }
    expect(events.map((e) => e.requestId)).toEqual(['req-create', 'req-update', 'req-delete']);
    expect(events[0].details).toEqual({
      name: 'Lab follow-up',
      sourceId: blueprint.id,
      type: 'event',
      queryId: null,
      event: 'Observation.final',
      when: null,
      schedule: null,
      autoStart: true,
      active: true,
      onePerSubject: false,
    });
    // Only what the request set, as stored.
    expect(events[1].details).toEqual({ set: { active: false, name: 'Lab follow-up (paused)' } });
    expect(events[2].details).toEqual({ name: 'Lab follow-up (paused)' });
  });

  it('saved queries: create, update and delete; a delete refused while in use writes nothing', async () => {
    const ws = await env.workspace();
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const filters = [{ op: 'with', tag: 'copd' }];
    const created = await call(ws, 'POST', '/v1/queries', 'req-q1', { name: 'COPD cohort', resourceType: 'Patient', filters });
    const { queryId } = created.json();
    const trigger = (
      await ws.call('POST', '/v1/triggers', { body: { name: 'Daily COPD', sourceId: blueprint.id, type: 'search', queryId } })
    ).json();
    const refused = await call(ws, 'DELETE', `/v1/queries/${queryId}`, 'req-refused');
    expect(refused.statusCode).toBe(409);
    expect(refused.json().code).toBe('query_in_use');
    expect((await ws.call('PATCH', `/v1/triggers/${trigger.triggerId}`, { body: { active: false } })).statusCode).toBe(200);
    const widened = [...filters, { op: 'without', tag: 'deceased' }];
    expect((await call(ws, 'PATCH', `/v1/queries/${queryId}`, 'req-q2', { filters: widened })).statusCode).toBe(200);
    expect((await call(ws, 'DELETE', `/v1/queries/${queryId}`, 'req-q3')).statusCode).toBe(204);

    const events = await auditOf(ws, 'query');
    expect(events.map((e) => [e.action, e.requestId, e.resourceId])).toEqual([
      ['query.create', 'req-q1', queryId],
      ['query.update', 'req-q2', queryId],
      ['query.delete', 'req-q3', queryId],
    ]);
    expect(events[0].details).toEqual({ name: 'COPD cohort', resourceType: 'Patient', filters });
    expect(events[1].details).toEqual({ set: { filters: widened } });
    expect(events[2].details).toEqual({ name: 'COPD cohort' });
  });

  it('webhook endpoints: create, update and delete; the secret reaches no audit row', async () => {
    const ws = await env.workspace();
    const created = await call(ws, 'POST', '/v1/webhooks', 'req-w1', { name: 'EHR feed' });
    expect(created.statusCode).toBe(201);
    const { webhookId, secret } = created.json();
    expect((await call(ws, 'PATCH', `/v1/webhooks/${webhookId}`, 'req-w2', { active: false })).statusCode).toBe(200);
    expect((await call(ws, 'DELETE', `/v1/webhooks/${webhookId}`, 'req-w3')).statusCode).toBe(204);

    const events = await auditOf(ws, 'webhook');
    expect(events.map((e) => [e.action, e.requestId, e.resourceType, e.resourceId])).toEqual([
      ['webhook.create', 'req-w1', 'webhook', webhookId],
      ['webhook.update', 'req-w2', 'webhook', webhookId],
      ['webhook.delete', 'req-w3', 'webhook', webhookId],
    ]);
    expect(events[0].details).toEqual({ name: 'EHR feed', active: true, auth: 'signature' });
    expect(events[1].details).toEqual({ set: { active: false } });
    const stored = await env.db.selectFrom('audit_events').select('details').where('workspace_id', '=', ws.workspaceId).execute();
    expect(stored.length).toBeGreaterThanOrEqual(3);
    for (const row of stored) expect(row.details).not.toContain(secret);
    expect(JSON.stringify(events)).not.toContain(secret);
  });

  it('a refused change writes nothing, and another workspace sees none of it', async () => {
    const ws = await env.workspace();
    const other = await env.workspace();
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const { triggerId } = (await ws.call('POST', '/v1/triggers', { body: { name: 'Web', sourceId: blueprint.id, type: 'web' } })).json();
    const { webhookId } = (await ws.call('POST', '/v1/webhooks', { body: { name: 'Feed' } })).json();

    // Bad bodies and another workspace's key: 4xx, no event.
    expect((await ws.call('POST', '/v1/triggers', { body: { name: 'x', sourceId: blueprint.id, type: 'web', event: 'Observation.final' } })).statusCode).toBe(400);
    expect((await ws.call('PATCH', `/v1/triggers/${triggerId}`, { body: { type: 'search' } })).statusCode).toBe(400);
    expect((await ws.call('PATCH', `/v1/webhooks/${webhookId}`, { body: { auth: 'bearer' } })).statusCode).toBe(400);
    expect((await other.call('PATCH', `/v1/triggers/${triggerId}`, { body: { active: false } })).statusCode).toBe(404);
    expect((await other.call('DELETE', `/v1/webhooks/${webhookId}`)).statusCode).toBe(404);

    // An empty PATCH changes nothing: 200 with the resource as it was, updatedAt unmoved, no event.
    const { queryId } = (await ws.call('POST', '/v1/queries', { body: { name: 'Q', resourceType: 'Patient' } })).json();
    for (const url of [`/v1/triggers/${triggerId}`, `/v1/webhooks/${webhookId}`, `/v1/queries/${queryId}`]) {
      const before = (await ws.call('GET', url)).json();
      await new Promise((resolve) => setTimeout(resolve, 5));
      const empty = await ws.call('PATCH', url, { body: {} });
      expect(empty.statusCode, empty.body).toBe(200);
      expect(empty.json()).toEqual(before);
      expect((await ws.call('GET', url)).json()).toEqual(before);
    }

    expect((await auditOf(ws, 'trigger')).map((e) => e.action)).toEqual(['trigger.create']);
    expect((await auditOf(ws, 'webhook')).map((e) => e.action)).toEqual(['webhook.create']);
    expect((await auditOf(ws, 'query')).map((e) => e.action)).toEqual(['query.create']);
    expect(await auditOf(other, 'trigger')).toEqual([]);
    expect(await auditOf(other, 'webhook')).toEqual([]);
  });
});
