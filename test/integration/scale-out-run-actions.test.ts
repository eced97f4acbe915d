/**
 * Run actions from the API while a worker in another process holds the run. The worker processes
 * are the ones the crash tests start (test/helpers/engine-worker-process.ts): the engine worker
 * `carepath worker` runs, with a short lease. The API is this process's, on its own connections.
 * On PostgreSQL two worker processes poll side by side, so a run let go, or a lease let lapse,
 * is taken at once by the other one; on SQLite one (one worker process per file, by rule).
 *
 * What must hold: an action that lands while a worker is mid-step neither takes the run from it
 * nor hands it to a second worker (its fence is raised once: one claim), the call in flight is
 * sent once, and an event raised at the same instant as a resume is seen exactly once.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { chain, fire, getRun, getSteps, patient, webTriggerFor } from '../helpers/engine-harness.js';
import { LedgerServer } from '../helpers/ledger-server.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { endEngineWorker, spawnEngineWorker, type WorkerProcess } from '../helpers/engine-worker-spawn.js';
import { wakeRunsWaitingFor } from '../../src/engine/event-waits.js';
import { until as waitUntil } from '../helpers/until.js';

/** Heartbeats every half second: the calls below (4 s) outlast the lease, and the actions land while they are out. */
const LEASE_MS = 1_500;


const spawnWorker = (env: TestEnv, id: string): Promise<WorkerProcess> => spawnEngineWorker(env, id, LEASE_MS);

const stopWorker = (worker: WorkerProcess): Promise<void> => endEngineWorker(worker, 'SIGTERM');

/** Waits for `check` (15 s at most, polled every 20 ms). */
const until = (check: () => Promise<boolean> | boolean, what: string, timeoutMs = 15_000) => waitUntil(check, what, timeoutMs, 20);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const kind of STORE_KINDS) {
  describe(`run actions while a worker process holds the run [${kind}]`, () => {
    const env = new TestEnv(kind, { env: { CAREPATH_HTTP_ALLOW: '127.0.0.1' } });
    const ledger = new LedgerServer();
    const workers: WorkerProcess[] = [];
    let ws: TestWorkspace;

    beforeAll(async () => {
      await env.start();
      await ledger.listen();
      ws = await env.workspace();
      const ids = kind === 'postgres' ? ['a', 'b'] : ['only'];
      workers.push(...(await Promise.all(ids.map((id) => spawnWorker(env, `actions-${kind}-${id}`)))));
    });
    afterAll(async () => {
      await Promise.all(workers.map(stopWorker));
      await ledger.close();
      await env.stop();
    });

    const act = (runId: string, action: string) => ws.call('POST', `/v1/runs/${runId}/${action}`);
    const row = (runId: string) =>
      env.db.selectFrom('runs').select(['automation_status', 'lease_owner', 'lease_fence']).where('id', '=', runId).executeTakeFirstOrThrow();
    const sentFor = (key: string) => ledger.requests.filter((request) => request.headers['idempotency-key'] === key);

    it('pause and resume while a worker process is mid-call: it keeps the run (one claim), the call is sent once, the run goes on', async () => {
      const path = `/held-${kind}`;
      ledger.on(path, { status: 200, delayMs: 4_000 });
      const { triggerId } = await webTriggerFor(ws, chain(`Paused and resumed mid-call ${kind}`, [
        { id: 'call', automations: [{ id: 'post', type: 'http', with: { method: 'POST', url: ledger.url(path), body: {} } }] },
        { id: 'after', automations: [{ id: 'next', type: 'set', with: { vars: { x: '1' } } }] },
      ]));
      const runId = await fire(ws, triggerId);
      await until(() => sentFor(`${runId}:call:post`).length === 1, 'the call');
      const holder = (await row(runId)).lease_owner;
      expect(holder).not.toBeNull();

      expect((await act(runId, 'pause')).json().automationStatus).toBe('paused');
      // Paused, the run is still the holder's: its lease does not lapse while the call is out,
      // and no other worker takes it.
      await sleep(LEASE_MS);
      expect(await row(runId)).toMatchObject({ automation_status: 'paused', lease_owner: holder, lease_fence: 1 });
      expect((await act(runId, 'resume')).json().automationStatus).toBe('running');

      await until(async () => (await getRun(ws, runId)).automationStatus === 'completed', 'the run to complete');
      expect(sentFor(`${runId}:call:post`)).toHaveLength(1);
      expect((await getSteps(ws, runId)).map((step) => [step.automationId, step.attempt, step.outcome])).toEqual([
        ['post', 1, 'ok'],
        ['next', 1, 'ok'],
      ]);
      // Claimed once: neither the pause nor the resume let the run go to another claim.
      expect(await row(runId)).toEqual({ automation_status: 'completed', lease_owner: null, lease_fence: 1 });
      const actions = await env.db
        .selectFrom('audit_events')
        .select('action')
        .where('resource_id', '=', runId)
        .where('action', 'in', ['run.create', 'run.start', 'run.pause', 'run.resume', 'run.cancel'])
        .orderBy('id')
        .execute();
      expect(actions.map((event) => event.action)).toEqual(['run.create', 'run.pause', 'run.resume']);
    });

    it('an event and a resume at the same instant, for a paused run a worker process holds mid-call: the event is seen once, the call sent once', async () => {
      // Two branches: one waits for the patient's discharge, the other is a slow call. The run is
      // paused while the call is out; then the discharge's wake and the resume arrive together.
      const extId = `held-ev-${kind}`;
      const subjectId = await patient(env, ws, extId);
      const path = `/held-ev-${kind}`;
      ledger.on(path, { status: 200, delayMs: 4_000 });
      const { triggerId } = await webTriggerFor(ws, {
        name: `Event and resume ${kind}`,
        nodes: [
          { id: 'start', kind: 'start' },
          { id: 'w', kind: 'action', automations: [{ id: 'visit', type: 'wait_for_event', with: { event: 'Encounter.finished' } }] },
          { id: 'call', kind: 'action', automations: [{ id: 'post', type: 'http', with: { method: 'POST', url: ledger.url(path), body: {} } }] },
          { id: 'done', kind: 'end' },
        ],
        links: [{ from: 'start', to: 'w' }, { from: 'start', to: 'call' }, { from: 'w', to: 'done' }, { from: 'call', to: 'done' }],
      });
      const runId = await fire(ws, triggerId, { subject: { reference: `Patient/${extId}` } });
      await until(() => sentFor(`${runId}:call:post`).length === 1, 'the call');
      await until(async () => (await env.db.selectFrom('run_event_waits').select('run_id').where('run_id', '=', runId).execute()).length === 1, 'the wait');
      const holder = (await row(runId)).lease_owner;
      expect(holder).not.toBeNull();
      expect((await act(runId, 'pause')).json().automationStatus).toBe('paused');

      const wake = () =>
        wakeRunsWaitingFor(env.db, { workspaceId: ws.workspaceId, subjectRecordId: subjectId, event: 'Encounter.finished', eventPayload: { n: 1 }, at: new Date().toISOString() });
      if (kind === 'sqlite') {
        // One write transaction at a time: nothing to interleave.
        const [woken, resumed] = await Promise.all([wake(), act(runId, 'resume')]);
        expect([woken, resumed.statusCode]).toEqual([1, 200]);
      } else {
        // Both made to wait for the run's row, which a third connection holds, and let go together.
        const locker = new pg.Client({ connectionString: env.container.config.databaseUrl, options: `-c search_path=${env.schema}` });
        await locker.connect();
        try {
          await locker.query('begin');
          await locker.query('select 1 from runs where id = $1 for update', [runId]);
          const woken = wake();
          const resumed = act(runId, 'resume');
          await sleep(200);
          await locker.query('commit');
          expect([await woken, (await resumed).statusCode]).toEqual([1, 200]);
        } finally {
          await locker.query('rollback').catch(() => undefined);
          await locker.end();
        }
      }
      expect(await row(runId)).toMatchObject({ automation_status: 'running', lease_owner: holder, lease_fence: 1 });

      await until(async () => (await getRun(ws, runId)).automationStatus === 'completed', 'the run to complete');
      expect(sentFor(`${runId}:call:post`)).toHaveLength(1);
      const steps = await getSteps(ws, runId);
      expect(steps.map((step) => [step.automationId, step.attempt, step.outcome]).sort()).toEqual([
        ['post', 1, 'ok'],
        ['visit', 1, 'event'],
      ]);
      expect(steps.find((step) => step.automationId === 'visit')!.output).toMatchObject({ event: 'Encounter.finished', payload: { n: 1 } });
      expect(await row(runId)).toEqual({ automation_status: 'completed', lease_owner: null, lease_fence: 1 });
      expect(await env.db.selectFrom('run_event_waits').select('run_id').where('run_id', '=', runId).execute()).toEqual([]);
    });
  });
}
