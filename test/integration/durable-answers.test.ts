import { afterAll, beforeAll, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { buildApp } from '../../src/http/app.js';
import type { Api } from '../../src/http/types.js';
import { sqlitePathOf } from '../../src/storage/connect.js';
import { describeEachStore, simpleBlueprint } from '../helpers/test-env.js';
import { signPayload } from '../../src/ingestion/signature.js';

/**
 * An answer that says a write was stored waits until the store has it on disk (on SQLite, a flush
 * of the WAL: http/plugins/durable-answers.ts). Here the flush is one the test lets finish.
 */
describeEachStore('answers to writes wait for the store to have them on disk', (env) => {
  let gate: { open: () => void; calls: number; waiting: Promise<void> };
  let app: Api;

  function closedGate() {
    let open!: () => void;
    const waiting = new Promise<void>((resolve) => (open = resolve));
    return { open, calls: 0, waiting };
  }

  beforeAll(async () => {
    gate = closedGate();
    const store = {
      ...env.container.store,
      syncCommits: () => {
        gate.calls++;
        return gate.waiting;
      },
    };
    app = await buildApp({ ...env.container, store });
    await app.ready();
  });
  afterAll(() => app?.close());

  const answered = async (pending: Promise<unknown>) => {
    let done = false;
    void pending.then(() => (done = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    return done;
  };

  it('has a flush on a SQLite file, none on PostgreSQL (a commit is on disk when it returns)', async () => {
    const store = env.container.store;
    if (env.kind === 'postgres') {
      expect(store.syncCommits).toBeUndefined();
      return;
    }
    // The suite's store is a file: committed pages are in its WAL, which the flush syncs.
    expect(typeof store.syncCommits).toBe('function');
    const ws = await env.workspace();
    expect((await ws.call('POST', '/v1/queries', { body: { name: 'q', resourceType: 'Patient', filters: [] } })).statusCode).toBe(201);
    expect(existsSync(`${sqlitePathOf(env.container.config.databaseUrl)}-wal`)).toBe(true);
    await expect(store.syncCommits!()).resolves.toBeUndefined();
  });

  it('holds a fire, a create and a run action until the flush; reads, searches and refusals go at once', async () => {
    gate = closedGate();
    const ws = await env.workspace();
    const headers = { authorization: `Bearer ${ws.key}`, 'content-type': 'application/json' };
    const call = (method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown) =>
      app.inject({ method, url, headers, payload: body === undefined ? undefined : JSON.stringify(body) });
    const blueprint = await ws.importBlueprint(simpleBlueprint());

    const creating = call('POST', '/v1/triggers', { name: 'Web', sourceId: blueprint.id, type: 'web', autoStart: false });
    expect(await answered(creating)).toBe(false);
    gate.open();
    const created = await creating;
    expect(created.statusCode).toBe(201);
    const triggerId = created.json().triggerId;

    gate = closedGate();
    const firing = call('POST', `/v1/triggers/${triggerId}`, { payload: { n: 1 } });
    expect(await answered(firing)).toBe(false);
    // The run is committed already: a read sees it while the fire's answer waits.
    const listed = await call('GET', `/v1/runs?triggerId=${triggerId}`);
    expect(listed.statusCode).toBe(200);
    expect(listed.json().data).toHaveLength(1);
    const search = await call('POST', '/v1/search', { resourceType: 'Pathway', filters: [{ op: 'with', tag: 'queued' }], limit: 10 });
    expect(search.statusCode).toBe(200);
    const refused = await call('POST', '/v1/triggers/0190c0de-0000-7000-8000-000000000009', {});
    expect(refused.statusCode).toBe(404);
    const callsWhileWaiting = gate.calls;
    expect(callsWhileWaiting).toBe(1);
    gate.open();
    const fired = await firing;
    expect(fired.statusCode).toBe(201);

    gate = closedGate();
    const starting = call('POST', `/v1/runs/${fired.json().runId}/start`);
    expect(await answered(starting)).toBe(false);
    gate.open();
    expect((await starting).statusCode).toBe(200);
  });

  it('holds a delivery\'s 202 until the flush; its refusal goes at once', async () => {
    const ws = await env.workspace();
    gate = closedGate();
    gate.open();
    const endpoint = (await app.inject({ method: 'POST', url: '/v1/webhooks', headers: { authorization: `Bearer ${ws.key}`, 'content-type': 'application/json' }, payload: '{"name":"Lab"}' })).json();
    const body = JSON.stringify({ resourceType: 'Patient', id: 'durable-1', name: [{ family: 'Jansen' }] });
    const deliver = (signature: string) =>
      app.inject({ method: 'POST', url: `/v1/webhooks/${endpoint.webhookId}`, headers: { 'content-type': 'application/json', 'x-service-signature': signature }, payload: body });

    gate = closedGate();
    const t = Math.floor(env.container.clock.now().getTime() / 1000);
    const refused = await deliver(`t=${t},v1=${'0'.repeat(64)}`);
    expect(refused.statusCode).toBe(401);
    expect(gate.calls).toBe(0);
    const delivering = deliver(signPayload(endpoint.secret, body, t));
    expect(await answered(delivering)).toBe(false);
    gate.open();
    expect((await delivering).statusCode).toBe(202);
  });
});
