/**
 * GET /v1/runs/{runId}/steps is paged (keyset on the step id, oldest first): `limit` 1–500,
 * default 100, and `cursor`; every page is audited as run.steps.read. Steps beyond the engine's
 * own are written straight into `run_steps` as the engine writes them (a UUID v7 id made when
 * the step starts), so that a run can hold hundreds of them, and more can be recorded between
 * two pages.
 */
import { expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { describeEachStore, type TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { chain, fire, getSteps, patient, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { insertSteps } from '../../src/engine/sql/step-rows.js';
import { uuidv7 } from '../../src/lib/ids.js';
import type { RunStepTable } from '../../src/storage/database.js';

const blueprint = chain('Paged steps', [
  { id: 'a', automations: [{ id: 's', type: 'set', with: { vars: { x: '1' } } }] },
  { id: 'b', automations: [{ id: 'nap', type: 'wait', with: { duration: 'P1D' } }] },
]);

interface Page {
  runId: string;
  subject: unknown;
  steps: { stepId: string; automationId: string; startedAt: string; output: unknown }[];
  nextCursor: string | null;
}

function expectError(res: LightMyRequestResponse, code: string, mentions?: string): void {
  expect(res.statusCode, res.body).toBe(400);
  const body = res.json();
  expect(Object.keys(body).sort()).toEqual(['code', 'error', 'requestId']);
  expect(body.code).toBe(code);
  expect(body.requestId).toBe(res.headers['x-request-id']);
  if (mentions) expect(body.error).toContain(mentions);
}

/** A run of the workspace about a patient, its two engine steps recorded (`s` done, `nap` waiting). */
async function waitingRun(env: TestEnv, ws: TestWorkspace, extId: string): Promise<{ runId: string; patientId: string }> {
  const { triggerId } = await webTriggerFor(ws, blueprint);
  const patientId = await patient(env, ws, extId);
  const runId = await fire(ws, triggerId, { subject: { reference: `Patient/${extId}` } });
  await testWorker(env).drain();
  return { runId, patientId };
}

/** Records `count` finished steps of the run now, as the engine would; answers their ids in order. */
async function recordSteps(env: TestEnv, runId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let done = 0; done < count; done += 200) {
    const rows: RunStepTable[] = [];
    for (let i = done; i < Math.min(count, done + 200); i++) {
      const at = new Date().toISOString();
      const id = uuidv7();
      ids.push(id);
      rows.push({
        id,
        run_id: runId,
        node_id: 'b',
        automation_id: `extra-${ids.length}`,
        automation_type: 'set',
        attempt: 1,
        started_at: at,
        finished_at: at,
        outcome: 'ok',
        output: JSON.stringify({ n: ids.length }),
        error: null,
      });
    }
    await insertSteps(env.db, rows);
  }
  return ids;
}

async function page(ws: TestWorkspace, runId: string, query = '', key?: string): Promise<Page> {
  const res = await ws.call('GET', `/v1/runs/${runId}/steps${query ? `?${query}` : ''}`, key ? { key } : {});
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function stepIdsInStore(env: TestEnv, runId: string): Promise<string[]> {
  const rows = await env.db.selectFrom('run_steps').select('id').where('run_id', '=', runId).execute();
  return rows.map((row) => row.id).sort();
}

async function auditedReads(ws: TestWorkspace): Promise<{ requestId: string; details: Record<string, unknown> }[]> {
  const res = await ws.call('GET', '/v1/audit-events?action=run.steps.read&limit=100');
  expect(res.statusCode).toBe(200);
  return res.json().data;
}

describeEachStore('GET /v1/runs/{runId}/steps, paged', (env) => {
  it('walks every step exactly once, in the order they started, while new steps are recorded between pages', async () => {
    const ws = await env.workspace();
    const { runId } = await waitingRun(env, ws, 'paged-1');
    await recordSteps(env, runId, 30);
    const before = await stepIdsInStore(env, runId);
    expect(before).toHaveLength(32);

    const seen: Page['steps'] = [];
    let cursor: string | null = null;
    let pages = 0;
    let recordedAfterLastPage: string[] = [];
    do {
      const got: Page = await page(ws, runId, `limit=7${cursor ? `&cursor=${cursor}` : ''}`);
      expect(got.runId).toBe(runId);
      expect(got.steps.length).toBeLessThanOrEqual(7);
      if (got.nextCursor) expect(got.steps).toHaveLength(7);
      seen.push(...got.steps);
      cursor = got.nextCursor;
      pages++;
      // The run goes on while the client pages: three more steps before each next read.
      recordedAfterLastPage = await recordSteps(env, runId, 3);
    } while (cursor);

    const ids = seen.map((step) => step.stepId);
    expect(new Set(ids).size).toBe(ids.length);
    // Everything the store held when the last page was read, in order: the engine's two steps
    // first, then the recorded ones, including every step recorded while paging but the last three.
    const all = await stepIdsInStore(env, runId);
    expect(ids).toEqual(all.filter((id) => !recordedAfterLastPage.includes(id)));
    expect(seen.slice(0, 2).map((step) => step.automationId)).toEqual(['s', 'nap']);
    const startedAt = seen.map((step) => step.startedAt);
    expect([...startedAt].sort()).toEqual(startedAt);
    expect(ids.length).toBe(32 + 3 * (pages - 1));
    expect(pages).toBeGreaterThan(32 / 7);
    // The whole run read the usual way (the test helper walks the pages too).
    expect((await getSteps(ws, runId)).map((step) => step.stepId)).toEqual(all);
  });

  it('answers 100 steps by default and at most 500; nextCursor is null on the last page', async () => {
    const ws = await env.workspace();
    const { runId } = await waitingRun(env, ws, 'paged-2');
    await recordSteps(env, runId, 599);
    const all = await stepIdsInStore(env, runId);
    expect(all).toHaveLength(601);

    const first = await page(ws, runId);
    expect(first.steps.map((step) => step.stepId)).toEqual(all.slice(0, 100));
    expect(first.nextCursor).toEqual(expect.any(String));
    expect(first.subject).toMatchObject({ resourceType: 'Patient', extId: 'paged-2' });
    const second = await page(ws, runId, `cursor=${first.nextCursor}`);
    expect(second.steps.map((step) => step.stepId)).toEqual(all.slice(100, 200));
    // Every page carries the run's subject.
    expect(second.subject).toEqual(first.subject);

    const max = await page(ws, runId, 'limit=500');
    expect(max.steps.map((step) => step.stepId)).toEqual(all.slice(0, 500));
    const rest = await page(ws, runId, `limit=500&cursor=${max.nextCursor}`);
    expect(rest.steps.map((step) => step.stepId)).toEqual(all.slice(500));
    expect(rest.nextCursor).toBeNull();
    expect(rest.steps[rest.steps.length - 1].output).toEqual({ n: 599 });

    const one = await page(ws, runId, 'limit=1');
    expect(one.steps.map((step) => step.automationId)).toEqual(['s']);
    // A page that ends exactly at the last step says so: no empty page after it.
    const exact = await page(ws, runId, `limit=101&cursor=${max.nextCursor}`);
    expect(exact.steps).toHaveLength(101);
    expect(exact.nextCursor).toBeNull();
  });

  it('a run with fewer steps than a page answers them all and no cursor', async () => {
    const ws = await env.workspace();
    const { runId } = await waitingRun(env, ws, 'paged-3');
    const got = await page(ws, runId);
    expect(got.steps.map((step) => step.automationId)).toEqual(['s', 'nap']);
    expect(got.nextCursor).toBeNull();
    const exact = await page(ws, runId, 'limit=2');
    expect(exact.steps).toHaveLength(2);
    expect(exact.nextCursor).toBeNull();
  });

  it('refuses a bad limit, a bad cursor, a cursor of another list and an unknown parameter (400), auditing nothing', async () => {
    const ws = await env.workspace();
    const { runId } = await waitingRun(env, ws, 'paged-4');
    const { runId: otherRun } = await waitingRun(env, ws, 'paged-5');
    await recordSteps(env, runId, 3);
    await recordSteps(env, otherRun, 3);
    const url = `/v1/runs/${runId}/steps`;

    for (const limit of ['0', '501', '-1', '1.5', 'abc', '']) {
      expectError(await ws.call('GET', `${url}?limit=${limit}`), 'invalid_request', 'querystring.limit');
    }
    for (const limit of ['0x10', '1e1', '01']) {
      expectError(await ws.call('GET', `${url}?limit=${limit}`), 'invalid_request', 'querystring.limit must be a whole number in decimal digits');
    }
    expectError(await ws.call('GET', `${url}?limit=5&limit=6`), 'invalid_request', 'querystring.limit is given more than once');
    expectError(await ws.call('GET', `${url}?sortBy=startedAt`), 'invalid_request', '"sortBy"');
    expectError(await ws.call('GET', `${url}?limit=5&offset=10`), 'invalid_request', '"offset"');
    expectError(await ws.call('GET', `${url}?cursor=${'a'.repeat(600)}`), 'invalid_request', 'querystring.cursor');
    expectError(await ws.call('GET', `${url}?cursor=`), 'invalid_request', 'querystring.cursor');

    const runsCursor = (await ws.call('GET', '/v1/runs?limit=1')).json().nextCursor as string;
    expect(runsCursor).toEqual(expect.any(String));
    const otherRunsCursor = (await page(ws, otherRun, 'limit=2')).nextCursor!;
    const notAnId = Buffer.from(JSON.stringify(['zzz', `run-steps:${runId}`])).toString('base64url');
    const ownCursor = (await page(ws, runId, 'limit=2')).nextCursor!;
    for (const cursor of ['garbage', notAnId, runsCursor, otherRunsCursor, `${ownCursor}!!`]) {
      expectError(await ws.call('GET', `${url}?cursor=${encodeURIComponent(cursor)}`), 'invalid_cursor');
    }

    // Only the two good reads above (the cursors' pages) were audited.
    expect((await auditedReads(ws)).map((event) => event.details.steps)).toEqual([2, 2]);
  });

  it("another workspace's key gets 404 for the run, with or without a cursor, and nothing is audited", async () => {
    const ws = await env.workspace();
    const other = await env.workspace();
    const { runId } = await waitingRun(env, ws, 'paged-6');
    await recordSteps(env, runId, 5);
    const cursor = (await page(ws, runId, 'limit=3')).nextCursor!;
    for (const query of ['', '?limit=3', `?cursor=${cursor}`]) {
      const res = await other.call('GET', `/v1/runs/${runId}/steps${query}`);
      expect(res.statusCode, query).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
    expect(await auditedReads(other)).toEqual([]);
    expect(await auditedReads(ws)).toHaveLength(1);
  });

  it('audits each page as run.steps.read: the run, its patient record, the key, the page\'s count and whether a cursor came', async () => {
    const ws = await env.workspace();
    const { runId, patientId } = await waitingRun(env, ws, 'paged-7');
    await recordSteps(env, runId, 8);
    const reader = await ws.keyWith(['runs:read']);
    let cursor: string | null = null;
    let n = 0;
    do {
      const res = await ws.call('GET', `/v1/runs/${runId}/steps?limit=4${cursor ? `&cursor=${cursor}` : ''}`, {
        key: reader.key,
        headers: { 'x-request-id': `steps-page-${++n}` },
      });
      expect(res.statusCode).toBe(200);
      cursor = res.json().nextCursor;
    } while (cursor);
    expect(n).toBe(3);
    const events = await auditedReads(ws);
    const read = { action: 'run.steps.read', keyId: reader.keyId, resourceType: 'run', resourceId: runId };
    // Newest first.
    expect(events).toEqual([
      expect.objectContaining({ ...read, requestId: 'steps-page-3', details: { subjectRecordId: patientId, steps: 2, cursor: true } }),
      expect.objectContaining({ ...read, requestId: 'steps-page-2', details: { subjectRecordId: patientId, steps: 4, cursor: true } }),
      expect.objectContaining({ ...read, requestId: 'steps-page-1', details: { subjectRecordId: patientId, steps: 4, cursor: false } }),
    ]);
  });
});
