/**
 * The example blueprints shipped beside the project (../shared/examples/blueprints) import and run, every path.
 * new-patient-welcome posts to 127.0.0.1:9099: a ledger listens there, and the allow-list names it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEachStore, type TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { fire, getRun, getSteps, patient, recordTags, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { LedgerServer } from '../helpers/ledger-server.js';
import { ManualClock } from '../../src/lib/clock.js';
import { parseBlueprintFile } from '../../src/modules/blueprints/blueprint.parse.js';
import { wakeRunsWaitingFor } from '../../src/engine/event-waits.js';
import { SHARED_EXAMPLE_BLUEPRINTS } from '../helpers/shared-files.js';

const EXAMPLES = SHARED_EXAMPLE_BLUEPRINTS;
const present = existsSync(EXAMPLES);

function example(name: string): unknown {
  const file = join(EXAMPLES, `${name}.json`);
  return parseBlueprintFile(readFileSync(file, 'utf8'), file);
}

const clock = new ManualClock('2030-09-01T09:00:00.000Z');
const ledger = new LedgerServer();

async function setUp(env: TestEnv, name: string, extId: string, tags: string[] = []) {
  const ws = await env.workspace();
  const subjectId = await patient(env, ws, extId, tags);
  const { triggerId } = await webTriggerFor(ws, example(name));
  return { ws, subjectId, triggerId, start: (payload: Record<string, unknown> = {}) => fire(ws, triggerId, { ...payload, subject: { reference: `Patient/${extId}` } }) };
}

async function stepsOf(ws: TestWorkspace, runId: string) {
  return (await getSteps(ws, runId)).map((s) => [s.nodeId, s.automationId, s.outcome]);
}

(present ? describe : describe.skip)('example blueprints', () => {
  beforeAll(() => ledger.listen(9099));
  afterAll(() => ledger.close());

  describeEachStore('examples', (env) => {
    it('post-discharge-follow-up: high risk flags the patient for a call', async () => {
      const { subjectId, start, ws } = await setUp(env, 'post-discharge-follow-up', `pd-high-${env.kind}`);
      const runId = await start({ riskScore: 7 });
      await testWorker(env).drain();
      expect((await getRun(ws, runId)).automationStatus).toBe('completed');
      expect(await recordTags(env, subjectId)).toEqual(['followup-call']);
      expect(await stepsOf(ws, runId)).toEqual([['flag', 'tag-it', 'ok']]);
    });

    it('post-discharge-follow-up: low risk waits two days, then completes', async () => {
      const { subjectId, start, ws } = await setUp(env, 'post-discharge-follow-up', `pd-low-${env.kind}`);
      const runId = await start({ riskScore: 2 });
      const worker = testWorker(env);
      await worker.drain();
      expect((await getRun(ws, runId)).automationStatus).toBe('running');
      clock.advance(2 * 24 * 3600_000);
      await worker.drain();
      expect((await getRun(ws, runId)).automationStatus).toBe('completed');
      expect(await recordTags(env, subjectId)).toEqual([]);
      expect(await stepsOf(ws, runId)).toEqual([['wait', 'two-days', 'elapsed']]);
    });

    it('new-patient-welcome: tags the patient and notifies the nurse team once', async () => {
      const { subjectId, start, ws } = await setUp(env, 'new-patient-welcome', `np-${env.kind}`);
      const runId = await start();
      await testWorker(env).drain();
      expect((await getRun(ws, runId)).automationStatus).toBe('completed');
      expect(await recordTags(env, subjectId)).toEqual(['new-patient']);
      const sent = ledger.requests.filter((r) => r.headers['idempotency-key'] === `${runId}:notify-nurse:post`);
      expect(sent).toHaveLength(1);
      expect(JSON.parse(sent[0].body)).toEqual({ patient: `np-${env.kind}`, message: 'New patient registered' });
      expect(await stepsOf(ws, runId)).toEqual([['mark-new', 'tag-new', 'ok'], ['notify-nurse', 'post', 'ok']]);
    });

    it('annual-review-reminder: a finished encounter closes the review', async () => {
      const { subjectId, start, ws } = await setUp(env, 'annual-review-reminder', `ar-visit-${env.kind}`, ['review-done']);
      const runId = await start();
      const worker = testWorker(env);
      await worker.drain();
      expect(await recordTags(env, subjectId)).toEqual(['review-due']);
      const woken = await wakeRunsWaitingFor(env.db, {
        workspaceId: ws.workspaceId,
        subjectRecordId: subjectId,
        event: 'Encounter.finished',
        eventPayload: { resourceType: 'Encounter', id: 'enc-1' },
        at: clock.now().toISOString(),
      });
      expect(woken).toBe(1);
      await worker.drain();
      expect((await getRun(ws, runId)).automationStatus).toBe('completed');
      expect(await recordTags(env, subjectId)).toEqual(['review-done']);
      expect(await stepsOf(ws, runId)).toEqual([
        ['remind', 'due', 'ok'],
        ['remind', 'note', 'ok'],
        ['wait-visit', 'visit', 'event'],
        ['close', 'done-tag', 'ok'],
      ]);
    });

    it('annual-review-reminder: no visit in 30 days stops the run for the practice', async () => {
      const { start, ws } = await setUp(env, 'annual-review-reminder', `ar-late-${env.kind}`);
      const runId = await start();
      const worker = testWorker(env);
      await worker.drain();
      clock.advance(30 * 24 * 3600_000);
      await worker.drain();
      expect(await getRun(ws, runId)).toMatchObject({ automationStatus: 'stopped', error: null });
      const graph = (await ws.call('GET', `/v1/diagrams/${runId}/graph`)).json();
      const states = Object.fromEntries(graph.nodes.map((n: { id: string; state: string }) => [n.id, n.state]));
      expect(states).toEqual({ start: 'done', remind: 'done', 'wait-visit': 'done', visited: 'done', close: 'skipped', escalate: 'done', done: 'skipped' });
    });
  }, { clock, env: { CAREPATH_HTTP_ALLOW: '127.0.0.1:9099' } });
});
