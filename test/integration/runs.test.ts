import { expect, it } from 'vitest';
import { describeEachStore, simpleBlueprint, type TestWorkspace } from '../helpers/test-env.js';
import { setRunStatus } from '../../src/engine/run-transitions.js';
import type { RunStatus } from '../../src/engine/run-status.js';
import type { TestEnv } from '../helpers/test-env.js';

async function queuedRun(ws: TestWorkspace) {
  const blueprint = await ws.importBlueprint(simpleBlueprint());
  const trigger = (
    await ws.call('POST', '/v1/triggers', { body: { name: 'Web', sourceId: blueprint.id, type: 'web', autoStart: false } })
  ).json();
  const run = (await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: {} })).json();
  expect(run.automationStatus).toBe('queued');
  return { run, trigger };
}

/** Puts a run straight into a status, the way the engine would, to test API actions from it. */
async function forceStatus(env: TestEnv, runId: string, to: RunStatus) {
  const row = await env.db.selectFrom('runs').select('automation_status').where('id', '=', runId).executeTakeFirstOrThrow();
  const moved = await setRunStatus(env.db, { runId, from: row.automation_status as RunStatus, to, at: new Date().toISOString() });
  expect(moved).toBe(true);
}

// DESIGN §5: [action, from, expected status code, expected status after (or error code)]
const MATRIX: [string, RunStatus, number, string][] = [
  ['start', 'queued', 200, 'scheduled'],
  ['start', 'scheduled', 409, 'run_not_queued'],
  ['start', 'running', 409, 'run_not_queued'],
  ['start', 'paused', 409, 'run_not_queued'],
  ['start', 'completed', 409, 'run_not_queued'],
  // Only a queued run starts: no ended run is brought back by a start.
  ['start', 'errored', 409, 'run_not_queued'],
  ['start', 'canceled', 409, 'run_not_queued'],
  ['start', 'stopped', 409, 'run_not_queued'],
  ['pause', 'queued', 200, 'paused'],
  ['pause', 'scheduled', 200, 'paused'],
  ['pause', 'running', 200, 'paused'],
  ['pause', 'paused', 200, 'paused'],
  ['pause', 'completed', 409, 'run_terminal'],
  ['pause', 'errored', 409, 'run_terminal'],
  ['pause', 'canceled', 409, 'run_terminal'],
  ['pause', 'stopped', 409, 'run_terminal'],
  ['resume', 'paused', 200, 'running'],
  ['resume', 'queued', 409, 'run_not_paused'],
  ['resume', 'running', 409, 'run_not_paused'],
  ['resume', 'completed', 409, 'run_not_paused'],
  // Only a paused run resumes: every end is final (a resumed `stopped` run would run again),
  // and a scheduled run has nothing to resume.
  ['resume', 'scheduled', 409, 'run_not_paused'],
  ['resume', 'errored', 409, 'run_not_paused'],
  ['resume', 'canceled', 409, 'run_not_paused'],
  ['resume', 'stopped', 409, 'run_not_paused'],
  ['cancel', 'queued', 200, 'canceled'],
  ['cancel', 'scheduled', 200, 'canceled'],
  ['cancel', 'running', 200, 'canceled'],
  ['cancel', 'paused', 200, 'canceled'],
  ['cancel', 'canceled', 200, 'canceled'],
  ['cancel', 'completed', 409, 'run_terminal'],
  ['cancel', 'errored', 409, 'run_terminal'],
  ['cancel', 'stopped', 409, 'run_terminal'],
];

describeEachStore('run actions', (env) => {
  for (const [action, from, status, expected] of MATRIX) {
    it(`${action} on a ${from} run answers ${status} ${expected}`, async () => {
      const ws = await env.workspace();
      const { run } = await queuedRun(ws);
      if (from !== 'queued') await forceStatus(env, run.runId, from);
      const res = await ws.call('POST', `/v1/runs/${run.runId}/${action}`, { headers: { 'x-request-id': `req-${action}-${from}` } });
      expect(res.statusCode).toBe(status);
      const after = (await ws.call('GET', `/v1/runs/${run.runId}`)).json();
      if (status === 200) {
        expect(res.json()).toMatchObject({ runId: run.runId, automationStatus: expected });
        expect(after.automationStatus).toBe(expected);
      } else {
        expect(res.json()).toMatchObject({ code: expected, requestId: `req-${action}-${from}` });
        expect(after.automationStatus).toBe(from);
      }
      const audit = (await ws.call('GET', `/v1/audit-events?action=run.${action}`)).json().data;
      const changed = status === 200 && from !== expected;
      expect(audit).toHaveLength(changed ? 1 : 0);
      if (changed) {
        expect(audit[0]).toMatchObject({
          requestId: `req-${action}-${from}`,
          keyId: ws.keyId,
          keyName: 'test key',
          resourceId: run.runId,
          details: { from, to: expected },
        });
      }
    });
  }

  it('stamps each action after the run\'s last change: the audit trail lists them in the order they happened', async () => {
    const ws = await env.workspace();
    const { run } = await queuedRun(ws);
    // The last change was stamped by a process whose clock is ahead of this one's (or in the
    // same millisecond): the next actions still come after it, each after the one before.
    const ahead = new Date(Date.now() + 60_000).toISOString();
    await env.db.updateTable('runs').set({ updated_at: ahead }).where('id', '=', run.runId).execute();
    for (const action of ['pause', 'resume', 'cancel']) expect((await ws.call('POST', `/v1/runs/${run.runId}/${action}`)).statusCode).toBe(200);
    const events = await env.db.selectFrom('audit_events').select(['action', 'at', 'details']).where('resource_id', '=', run.runId).where('action', 'like', 'run.%').orderBy('id').execute();
    expect(events.map((e) => e.action)).toEqual(['run.create', 'run.pause', 'run.resume', 'run.cancel']);
    const times = events.slice(1).map((e) => e.at);
    expect(times[0] > ahead).toBe(true);
    expect(times[1] > times[0] && times[2] > times[1]).toBe(true);
    expect((await ws.call('GET', `/v1/runs/${run.runId}`)).json().updatedAt).toBe(times[2]);
  });

  it('keeps the Pathway record tagged with the current status', async () => {
    const ws = await env.workspace();
    const { run } = await queuedRun(ws);
    await ws.call('POST', `/v1/runs/${run.runId}/pause`);
    const tags = await env.db.selectFrom('record_tags').select('tag').where('record_id', '=', run.runId).execute();
    expect(tags.map((t) => t.tag)).toEqual(['paused']);
  });

  it('answers 404 for unknown runs, runs of other tenants and ids that are not UUIDs', async () => {
    const ws = await env.workspace();
    const other = await env.workspace();
    const { run } = await queuedRun(ws);
    for (const url of [`/v1/runs/${run.runId}`, `/v1/runs/${run.runId}/cancel`]) {
      const method = url.endsWith('cancel') ? 'POST' : 'GET';
      const res = await other.call(method, url);
      expect(res.statusCode).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
    expect((await ws.call('GET', '/v1/runs/not-a-uuid')).statusCode).toBe(404);
    expect((await ws.call('GET', '/v1/runs/0190a0a0-0000-7000-8000-000000000000')).statusCode).toBe(404);
    expect((await ws.call('GET', `/v1/runs/${run.runId}`)).json().automationStatus).toBe('queued');
  });

  it('lists runs newest first with filters and a stable cursor', async () => {
    const ws = await env.workspace();
    const { trigger } = await queuedRun(ws);
    for (let i = 0; i < 6; i++) await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: { idempotencyKey: `key-${i}` } });
    const seen: string[] = [];
    let cursor: string | null = null;
    let inserted = 0;
    do {
      const page: { data: { runId: string }[]; nextCursor: string | null } = (await ws.call('GET', `/v1/runs?triggerId=${trigger.triggerId}&limit=2${cursor ? `&cursor=${cursor}` : ''}`)).json();
      seen.push(...(page.data as { runId: string }[]).map((r) => r.runId));
      cursor = page.nextCursor;
      // New runs arriving while paging must not shift or repeat what is still to come.
      if (inserted++ < 2) await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: {} });
    } while (cursor);
    expect(seen).toHaveLength(7);
    expect(new Set(seen).size).toBe(7);
    expect([...seen].sort().reverse()).toEqual(seen);

    const byKey = (await ws.call('GET', '/v1/runs?idempotencyKey=key-3')).json().data;
    expect(byKey).toHaveLength(1);
    const queued = (await ws.call('GET', '/v1/runs?status=queued&limit=100')).json().data;
    expect(queued).toHaveLength(9);
    expect((await ws.call('GET', '/v1/runs?status=nope')).statusCode).toBe(400);
    expect((await ws.call('GET', '/v1/runs?limit=101')).statusCode).toBe(400);
    expect((await ws.call('GET', '/v1/runs?cursor=zzz')).json().code).toBe('invalid_cursor');
  });

  it('aggregates a trigger’s runs by status with the ten newest', async () => {
    const ws = await env.workspace();
    const { run, trigger } = await queuedRun(ws);
    for (let i = 0; i < 11; i++) await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: {} });
    await ws.call('POST', `/v1/runs/${run.runId}/cancel`);
    const res = await ws.call('GET', `/v1/triggers/${trigger.triggerId}/status`);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ queued: 11, canceled: 1, scheduled: 0, running: 0, paused: 0, completed: 0, errored: 0, stopped: 0 });
    expect(body.recentRuns).toHaveLength(10);
    expect(body.recentRuns[0]).toEqual({
      runId: expect.any(String),
      name: 'Simple pathway',
      automationStatus: 'queued',
      createdAt: expect.any(String),
    });
  });
});
