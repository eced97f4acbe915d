import { expect, it } from 'vitest';
import { describeEachStore, simpleBlueprint, type TestWorkspace } from '../helpers/test-env.js';

async function webTrigger(ws: TestWorkspace, extra: Record<string, unknown> = {}) {
  const blueprint = await ws.importBlueprint(simpleBlueprint());
  const res = await ws.call('POST', '/v1/triggers', { body: { name: 'Web', sourceId: blueprint.id, type: 'web', ...extra } });
  expect(res.statusCode).toBe(201);
  return { blueprint, trigger: res.json() };
}

describeEachStore('firing a web trigger', (env) => {
  it('creates a scheduled run with only the create fields', async () => {
    const ws = await env.workspace();
    const { blueprint, trigger } = await webTrigger(ws);
    const res = await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: { payload: { riskScore: 7 } } });
    expect(res.statusCode).toBe(201);
    const run = res.json();
    expect(Object.keys(run).sort()).toEqual(['automationStatus', 'createdAt', 'idempotencyKey', 'runId', 'sourceId', 'triggerId']);
    expect(run).toMatchObject({ sourceId: blueprint.id, triggerId: trigger.triggerId, idempotencyKey: null, automationStatus: 'scheduled' });
    const got = await ws.call('GET', `/v1/runs/${run.runId}`);
    expect(got.statusCode).toBe(200);
    expect(got.json()).toMatchObject({ runId: run.runId, automationStatus: 'scheduled', error: null });
  });

  it('answers the same run for the same key and body, 409 for another body, one audit event', async () => {
    const ws = await env.workspace();
    const { trigger } = await webTrigger(ws);
    const url = `/v1/triggers/${trigger.triggerId}`;
    const first = await ws.call('POST', url, { body: { payload: { a: 1, b: 2 } }, headers: { 'idempotency-key': 'k-1' } });
    expect(first.statusCode).toBe(201);
    const replay = await ws.call('POST', url, { payload: '{ "payload": {"b": 2, "a": 1} }', headers: { 'idempotency-key': 'k-1', 'content-type': 'application/json' } });
    expect(replay.statusCode).toBe(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json().runId).toBe(first.json().runId);
    const other = await ws.call('POST', url, { body: { payload: { a: 2 } }, headers: { 'idempotency-key': 'k-1' } });
    expect(other.statusCode).toBe(409);
    expect(other.json().code).toBe('idempotency_mismatch');
    const audit = await ws.call('GET', '/v1/audit-events?action=run.create');
    expect(audit.json().data).toHaveLength(1);
  });

  it('answers a retry with the original run after its trigger was deactivated or deleted; a new request is refused', async () => {
    // A client whose first answer was lost (a timeout) retries with its key: told trigger_inactive
    // or not_found, it would conclude that no run exists, while one does.
    const ws = await env.workspace();
    const { trigger } = await webTrigger(ws, { autoStart: false });
    const url = `/v1/triggers/${trigger.triggerId}`;
    const fireWith = (key: string | null, payload: unknown) =>
      ws.call('POST', url, { body: { payload }, headers: key === null ? {} : { 'idempotency-key': key } });
    const first = await fireWith('late-retry', { v: 1 });
    expect(first.statusCode).toBe(201);
    const runId = first.json().runId;

    expect((await ws.call('PATCH', url, { body: { active: false } })).statusCode).toBe(200);
    const retried = await fireWith('late-retry', { v: 1 });
    expect(retried.statusCode).toBe(200);
    expect(retried.headers['idempotent-replayed']).toBe('true');
    expect(retried.json()).toMatchObject({ runId, triggerId: trigger.triggerId, automationStatus: 'queued', idempotencyKey: 'late-retry' });
    expect((await fireWith('late-retry', { v: 2 })).json().code).toBe('idempotency_mismatch');
    for (const key of ['a-new-key', null]) {
      const refused = await fireWith(key, { v: 1 });
      expect(refused.statusCode).toBe(409);
      expect(refused.json()).toMatchObject({ code: 'trigger_inactive', requestId: expect.any(String) });
    }

    expect((await ws.call('DELETE', url)).statusCode).toBe(204);
    const afterDelete = await fireWith('late-retry', { v: 1 });
    expect(afterDelete.statusCode).toBe(200);
    expect(afterDelete.json().runId).toBe(runId);
    expect((await fireWith('another-new-key', { v: 1 })).statusCode).toBe(404);
    // The key sent to another trigger id gets that id's own answer, not a replay or a mismatch.
    const elsewhere = await ws.call('POST', '/v1/triggers/0190c0de-0000-7000-8000-000000000009', { body: { payload: { v: 1 } }, headers: { 'idempotency-key': 'late-retry' } });
    expect(elsewhere.statusCode).toBe(404);
    expect(elsewhere.json().code).toBe('not_found');
    // Another workspace's key of the same name replays nothing of this one.
    const other = await env.workspace();
    const foreign = await other.call('POST', url, { body: { payload: { v: 1 } }, headers: { 'idempotency-key': 'late-retry' } });
    expect(foreign.statusCode).toBe(404);
    const runs = await env.db.selectFrom('runs').select('id').where('trigger_id', '=', trigger.triggerId).execute();
    expect(runs.map((run) => run.id)).toEqual([runId]);
  });

  it('answers 409 idempotency_mismatch to the same key and payload with another autoStart; one run for the key', async () => {
    // autoStart shapes the run (scheduled or queued), so it is part of what the key stands for:
    // answering the first, scheduled run to a request for a queued one would start work the
    // caller asked to hold.
    const ws = await env.workspace();
    const { trigger } = await webTrigger(ws);
    const url = `/v1/triggers/${trigger.triggerId}`;
    const headers = { 'idempotency-key': 'k-auto' };
    const first = await ws.call('POST', url, { body: { payload: { a: 1 }, autoStart: true }, headers });
    expect(first.statusCode).toBe(201);
    expect(first.json().automationStatus).toBe('scheduled');
    const other = await ws.call('POST', url, { body: { payload: { a: 1 }, autoStart: false }, headers });
    expect(other.statusCode).toBe(409);
    expect(other.json().code).toBe('idempotency_mismatch');
    const runs = await ws.call('GET', '/v1/runs?idempotencyKey=k-auto');
    expect(runs.json().data.map((run: { runId: string; automationStatus: string }) => [run.runId, run.automationStatus])).toEqual([
      [first.json().runId, 'scheduled'],
    ]);
  });

  it('makes exactly one run for 100 parallel fires with one key', async () => {
    const ws = await env.workspace();
    const { trigger } = await webTrigger(ws);
    const url = `/v1/triggers/${trigger.triggerId}`;
    const answers = await Promise.all(
      Array.from({ length: 100 }, () => ws.call('POST', url, { body: { payload: { x: 1 }, idempotencyKey: 'same' } })),
    );
    const statuses = answers.map((a) => a.statusCode);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 200)).toHaveLength(99);
    expect(new Set(answers.map((a) => a.json().runId)).size).toBe(1);
    const runs = await ws.call('GET', '/v1/runs?idempotencyKey=same');
    expect(runs.json().data).toHaveLength(1);
    const audit = await ws.call('GET', '/v1/audit-events?action=run.create');
    expect(audit.json().data).toHaveLength(1);
  });

  it('writes a batch of concurrent fires with and without keys: one run and one audit event each', async () => {
    const ws = await env.workspace();
    const { trigger } = await webTrigger(ws);
    const url = `/v1/triggers/${trigger.triggerId}`;
    const earlier = await ws.call('POST', url, { body: { payload: { n: -1 } }, headers: { 'idempotency-key': 'taken' } });
    expect(earlier.statusCode).toBe(201);
    // Sent together, these land in the same group commit: fresh keys, no keys, a key used twice
    // in the batch, a replay of an earlier key and a clash with it.
    const bodies = [
      ...Array.from({ length: 10 }, (_, n) => ({ body: { payload: { n } }, headers: { 'idempotency-key': `fresh-${n}` } })),
      ...Array.from({ length: 10 }, (_, n) => ({ body: { payload: { n } } })),
      { body: { payload: { twice: true }, idempotencyKey: 'twice' } },
      { body: { payload: { twice: true }, idempotencyKey: 'twice' } },
      { body: { payload: { n: -1 } }, headers: { 'idempotency-key': 'taken' } },
      { body: { payload: { n: -2 } }, headers: { 'idempotency-key': 'taken' } },
    ];
    const answers = await Promise.all(bodies.map((options) => ws.call('POST', url, options)));
    const statuses = answers.map((a) => a.statusCode);
    expect(statuses.slice(0, 20)).toEqual(Array(20).fill(201));
    expect(statuses.slice(20, 22).sort()).toEqual([200, 201]);
    expect(answers[20].json().runId).toBe(answers[21].json().runId);
    expect(statuses[22]).toBe(200);
    expect(answers[22].json().runId).toBe(earlier.json().runId);
    expect(statuses[23]).toBe(409);

    const created = [earlier, ...answers.slice(0, 21)].map((a) => a.json());
    expect(new Set(created.map((run) => run.runId)).size).toBe(22);
    for (const run of created.slice(1, 11)) expect(run.idempotencyKey).toMatch(/^fresh-/);
    for (const run of created.slice(11, 21)) expect(run.idempotencyKey).toBeNull();
    const audit = await ws.call('GET', '/v1/audit-events?action=run.create&limit=100');
    expect(audit.json().data.map((event: { resourceId: string }) => event.resourceId).sort()).toEqual(
      created.map((run) => run.runId).sort(),
    );
    const listed = await ws.call('GET', `/v1/runs?limit=100`);
    expect(listed.json().data).toHaveLength(22);
    // Each run's Pathway search record and status tag were written in the same batch.
    const search = await ws.call('POST', '/v1/search', {
      body: { resourceType: 'Pathway', filters: [{ op: 'with', tag: 'scheduled' }], limit: 50 },
    });
    expect(search.statusCode, search.body).toBe(200);
    expect(search.json().total).toBe(22);
  });

  it('refuses search and event triggers with trigger_not_web', async () => {
    const ws = await env.workspace();
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const created = await ws.call('POST', '/v1/triggers', { body: { name: 'E', sourceId: blueprint.id, type: 'event', event: 'Encounter.finished' } });
    expect(created.statusCode).toBe(201);
    const res = await ws.call('POST', `/v1/triggers/${created.json().triggerId}`, { body: {} });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ code: 'trigger_not_web', error: 'only web triggers can be fired; this one is an event trigger' });
  });
});
