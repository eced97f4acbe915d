/**
 * SQLite reads due runs without claiming them; each run's first write claims it in its own
 * transaction (src/engine/sql/claim-on-write.ts). These tests hold that first write to the
 * claim's guarantees: it holds only for a run nobody changed since it was read, it leases the
 * run (or ends it) at a raised fence, and the worker's lease learns of the claim only once it is
 * committed. PostgreSQL keeps its claim statement: an unclaimed lease never reaches its commits.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import BetterSqlite3 from 'better-sqlite3';
import { describeEachStore, type TestWorkspace } from '../helpers/test-env.js';
import { chain, fire, getRun, getSteps, recordTags, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { claimRuns } from '../../src/engine/sql/claim-runs.js';
import { readDueRuns } from '../../src/engine/sql/read-due-runs.js';
import { commitBatch, type StepWrite } from '../../src/engine/step-committer.js';
import type { Lease } from '../../src/engine/sql/lease.js';
import { setRunStatus } from '../../src/engine/run-transitions.js';
import { engineServices } from '../../src/engine/engine-services.js';
import { RunWorker } from '../../src/engine/worker.js';
import { addMs } from '../../src/lib/clock.js';
import { sqliteConnectionOf, sqlitePathOf } from '../../src/storage/connect.js';
import { capturedLogger } from '../helpers/log-capture.js';
import { LedgerServer } from '../helpers/ledger-server.js';
import { createAllowList } from '../../src/engine/outbound/allow-list.js';

const ledger = new LedgerServer();
beforeAll(() => ledger.listen());
afterAll(() => ledger.close());
/** The tests' calls go to a ledger server on this machine, which the default allow-list refuses. */
const LOOPBACK = { allow: createAllowList(['127.0.0.1']) };

describeEachStore('engine: a run read unclaimed is claimed by its first write', (env) => {
  const oneSet = chain('Claimed by its write', [{ id: 'a', automations: [{ id: 's', type: 'set', with: { vars: { x: '1' } } }] }]);
  const sqliteOnly = it.runIf(env.kind === 'sqlite');
  const postgresOnly = it.runIf(env.kind === 'postgres');

  const readLease = (runId: string, fence = 0): Lease => ({
    runId,
    owner: 'reader',
    fence,
    unclaimed: { status: 'scheduled', leaseMs: 30_000 },
  });
  const firstWrite = (lease: Lease, at: string, extra: Partial<StepWrite> = {}): StepWrite => ({
    lease,
    at,
    from: 'scheduled',
    state: '{"first":true}',
    requireRunning: true,
    insertStep: {
      id: `0190a1b2-c3d4-7e5f-8a9b-${lease.runId.slice(-12)}`,
      run_id: lease.runId, node_id: 'a', automation_id: 's', automation_type: 'set', attempt: 1,
      started_at: at, finished_at: null, outcome: null, output: null, error: null,
    },
    ...extra,
  });
  const runRow = (runId: string) =>
    env.db
      .selectFrom('runs')
      .select(['automation_status', 'lease_owner', 'lease_fence', 'available_at', 'engine_state'])
      .where('id', '=', runId)
      .executeTakeFirstOrThrow();
  const stepCount = async (runId: string) => (await env.db.selectFrom('run_steps').select('id').where('run_id', '=', runId).execute()).length;

  /** Both ways a batch commits on SQLite: prepared statements (plain writes) and the transaction (writes with effects). */
  const commitPaths = [
    { path: 'prepared statements', effect: undefined },
    { path: 'the transaction', effect: async () => undefined },
  ];

  async function scheduledRun(ws: TestWorkspace): Promise<string> {
    const { triggerId } = await webTriggerFor(ws, oneSet);
    return fire(ws, triggerId);
  }

  for (const { path, effect } of commitPaths) {
    sqliteOnly(`through ${path}: the first write leases the run at a raised fence, moves it running and records its step; the lease holds from then on`, async () => {
      const ws = await env.workspace();
      const runId = await scheduledRun(ws);
      // Written 10 s after it was read: the lease runs from the claiming write's time, whole.
      const now = addMs(new Date().toISOString(), 10_000);
      const leaseUntil = addMs(now, 30_000);
      const lease = readLease(runId);
      expect([...(await commitBatch(env.db, [firstWrite(lease, now, effect && { effect })]))]).toEqual([runId]);

      expect(lease).toEqual({ runId, owner: 'reader', fence: 1 });
      expect(await runRow(runId)).toEqual({ automation_status: 'running', lease_owner: 'reader', lease_fence: 1, available_at: leaseUntil, engine_state: '{"first":true}' });
      expect(await recordTags(env, runId)).toContain('running');
      expect(await stepCount(runId)).toBe(1);

      // The claim is an ordinary lease now: the next write passes at its fence and ends the run.
      const end: StepWrite = { lease, at: now, from: 'running', state: '{"done":true}', requireRunning: true, end: { status: 'completed', error: null } };
      expect([...(await commitBatch(env.db, [end]))]).toEqual([runId]);
      expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    });

    sqliteOnly(`through ${path}: a first write that ends the run ends it at once, leaving no lease`, async () => {
      const ws = await env.workspace();
      const runId = await scheduledRun(ws);
      const now = new Date().toISOString();
      const lease = readLease(runId);
      const write = firstWrite(lease, now, { end: { status: 'completed', error: null }, ...(effect && { effect }) });
      expect([...(await commitBatch(env.db, [write]))]).toEqual([runId]);
      expect(lease.unclaimed).toBeUndefined();
      expect(await runRow(runId)).toMatchObject({ automation_status: 'completed', lease_owner: null, lease_fence: 1 });
      expect(await recordTags(env, runId)).toContain('completed');
      expect(await recordTags(env, runId)).not.toContain('scheduled');
    });

    sqliteOnly(`through ${path}: a run paused, claimed by another worker, or still leased since it was read is not claimed, and nothing is written`, async () => {
      const ws = await env.workspace();
      const [paused, taken, held] = [await scheduledRun(ws), await scheduledRun(ws), await scheduledRun(ws)];
      const now = new Date().toISOString();
      const leaseUntil = addMs(now, 30_000);
      // Read at fence 0, unowned; then each changes before its first write.
      expect(await setRunStatus(env.db, { runId: paused, from: 'scheduled', to: 'paused', at: now })).toBe(true);
      const claimedByOther = await claimRuns(env.db, { owner: 'other', now, leaseUntil, limit: 100 });
      expect(claimedByOther.map((row) => row.id)).toEqual(expect.arrayContaining([taken, held]));
      const leases = { paused: readLease(paused), taken: readLease(taken), held: readLease(held, 1) };
      const writes = Object.values(leases).map((lease) => firstWrite(lease, now, effect && { effect }));
      expect([...(await commitBatch(env.db, writes))]).toEqual([]);

      for (const lease of Object.values(leases)) expect(lease.unclaimed).toBeDefined();
      expect(await runRow(paused)).toMatchObject({ automation_status: 'paused', lease_owner: null, lease_fence: 0, engine_state: null });
      expect(await recordTags(env, paused)).toEqual(expect.arrayContaining(['paused']));
      // `held` names the fence its holder has, but a run with an owner is never claimed by a write.
      for (const runId of [taken, held]) expect(await runRow(runId)).toMatchObject({ automation_status: 'scheduled', lease_owner: 'other', lease_fence: 1, engine_state: null });
      for (const runId of [paused, taken, held]) expect(await stepCount(runId)).toBe(0);
    });
  }

  sqliteOnly('a batch rolled back leaves the lease unclaimed and the run as it was read; the retry claims it', async () => {
    const ws = await env.workspace();
    const runId = await scheduledRun(ws);
    const now = new Date().toISOString();
    const lease = readLease(runId);
    const failing = firstWrite(lease, now, {
      effect: async () => {
        throw new Error('the effect failed');
      },
    });
    await expect(commitBatch(env.db, [failing])).rejects.toThrow('the effect failed');
    expect(lease).toMatchObject({ fence: 0, unclaimed: { status: 'scheduled' } });
    expect(await runRow(runId)).toMatchObject({ automation_status: 'scheduled', lease_owner: null, lease_fence: 0, engine_state: null });
    expect(await stepCount(runId)).toBe(0);

    expect([...(await commitBatch(env.db, [firstWrite(lease, now)]))]).toEqual([runId]);
    expect(lease).toEqual({ runId, owner: 'reader', fence: 1 });
  });

  sqliteOnly('a worker writes each run once: fence 1 and one step row per step, the status tag moved once', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Two steps', [
      { id: 'a', automations: [{ id: 'x', type: 'set', with: { vars: { x: '1' } } }] },
      { id: 'b', automations: [{ id: 'y', type: 'set', with: { vars: { y: 'vars.x + 1' } } }] },
    ]));
    const runIds = await Promise.all(Array.from({ length: 30 }, () => fire(ws, triggerId)));
    const worker = testWorker(env, { batchSize: 7 });
    expect(await worker.drain()).toBe(30);
    for (const runId of runIds) {
      expect(await runRow(runId)).toMatchObject({ automation_status: 'completed', lease_owner: null, lease_fence: 1 });
      expect((await getSteps(ws, runId)).map((step) => [step.nodeId, step.outcome, step.attempt])).toEqual([['a', 'ok', 1], ['b', 'ok', 1]]);
      expect(JSON.parse((await runRow(runId)).engine_state!).vars).toEqual({ x: 1, y: 2 });
    }
  });

  sqliteOnly('reads skip the runs a worker read whose first write is not committed yet, and read the rest', async () => {
    const ws = await env.workspace();
    const runIds = await Promise.all(Array.from({ length: 6 }, () => scheduledRun(ws)));
    const now = addMs(new Date().toISOString(), 1_000);
    const first = await readDueRuns(env.db, { now, limit: 100, skip: [] });
    const ours = first.filter((row) => runIds.includes(row.id));
    expect(ours).toHaveLength(6);
    const skipped = ours.slice(0, 4);
    const second = await readDueRuns(env.db, { now, limit: 100, skip: skipped.map((row) => row.seq) });
    expect(second.map((row) => row.id)).toEqual(first.map((row) => row.id).filter((id) => !skipped.some((row) => row.id === id)));
  });

  sqliteOnly('when the store refuses a run its first write and its claim, the worker reads again only after a pause, not in a loop', async () => {
    const ws = await env.workspace();
    const runId = await scheduledRun(ws);
    // Another process holds the write lock (an admin command, a backup): reads go on in WAL mode,
    // every write fails at once with this connection waiting for no one.
    const connection = sqliteConnectionOf(env.db)!;
    const blocker = new BetterSqlite3(sqlitePathOf(env.container.config.databaseUrl)!);
    const { logger, lines } = capturedLogger('warn');
    const worker = new RunWorker({ ...engineServices(env.container), logger }, { leaseMs: 5_000, pollMs: 10 });
    connection.pragma('busy_timeout = 0');
    blocker.exec('begin immediate');
    try {
      worker.start();
      await new Promise((resolve) => setTimeout(resolve, 400));
    } finally {
      blocker.exec('rollback');
      blocker.close();
      connection.pragma('busy_timeout = 5000');
    }
    await worker.stop();
    // Without the pause, the run, still due, was read and failed again every few milliseconds.
    const failures = lines.filter((line) => line.msg === 'executing a run failed; it will be retried' && line.runId === runId);
    expect(failures.length).toBeGreaterThanOrEqual(1);
    expect(failures.length).toBeLessThanOrEqual(2);
    expect(await runRow(runId)).toMatchObject({ automation_status: 'scheduled', lease_owner: null, lease_fence: 0 });
    expect(await testWorker(env).drain()).toBeGreaterThanOrEqual(1);
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
  });

  it('workers started and stopped while two others run (reads not yet claimed let go): every run ends, each call sent once with its key, local steps once', async () => {
    // Both stores: on SQLite the stopped workers drop runs they read and had not claimed yet; on
    // PostgreSQL they let go of runs they claimed.
    const ws = await env.workspace();
    ledger.on(`/churn-a-${env.kind}`, { status: 200, delayMs: 20 });
    ledger.on(`/churn-b-${env.kind}`, { status: 200, delayMs: 5 });
    const { triggerId } = await webTriggerFor(ws, chain('Churned workers', [
      { id: 's', automations: [{ id: 's1', type: 'set', with: { vars: { x: '1' } } }] },
      { id: 'h', automations: [{ id: 'h1', type: 'http', with: { method: 'POST', url: ledger.url(`/churn-a-${env.kind}`) } }] },
      { id: 'w', automations: [{ id: 'w1', type: 'wait', with: { duration: 'PT0.05S' } }] },
      { id: 'h2', automations: [{ id: 'h2', type: 'http', with: { method: 'POST', url: ledger.url(`/churn-b-${env.kind}`) } }] },
      { id: 't', automations: [{ id: 't1', type: 'set', with: { vars: { y: '2' } } }] },
    ]));
    const runIds: string[] = [];
    for (let i = 0; i < 150; i++) runIds.push(await fire(ws, triggerId, { i }));
    const sentBefore = ledger.requests.length;
    const steady = ['a', 'b'].map((workerId) => testWorker(env, { workerId, pollMs: 5 }, LOOPBACK));
    for (const worker of steady) worker.start();
    const left = async () => (await env.db.selectFrom('runs').select('id').where('id', 'in', runIds).where('automation_status', 'in', ['scheduled', 'running']).execute()).length;
    const deadline = Date.now() + 30_000;
    for (let churn = 0; (await left()) > 0 && Date.now() < deadline; churn++) {
      const churned = testWorker(env, { workerId: `churned-${churn}`, pollMs: 1 }, LOOPBACK);
      churned.start();
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 30));
      await churned.stop();
    }
    for (const worker of steady) await worker.stop();

    const statuses = await env.db.selectFrom('runs').select('automation_status').where('id', 'in', runIds).execute();
    expect(statuses.map((row) => row.automation_status)).toEqual(runIds.map(() => 'completed'));
    const sent = new Map<string, number>();
    for (const request of ledger.requests.slice(sentBefore)) {
      const key = String(request.headers['idempotency-key']);
      if (runIds.some((runId) => key.startsWith(runId))) sent.set(key, (sent.get(key) ?? 0) + 1);
    }
    expect(sent.size).toBe(300);
    expect([...sent.values()].every((times) => times === 1)).toBe(true);
    const steps = await env.db.selectFrom('run_steps').select(['run_id', 'automation_id', 'outcome']).where('run_id', 'in', runIds).execute();
    expect(steps.filter((step) => step.outcome === 'interrupted')).toEqual([]);
    const perStep = new Map<string, number>();
    for (const step of steps) perStep.set(`${step.run_id}:${step.automation_id}`, (perStep.get(`${step.run_id}:${step.automation_id}`) ?? 0) + 1);
    expect(perStep.size).toBe(150 * 5);
    expect([...perStep.values()].every((times) => times === 1)).toBe(true);
  }, 60_000);

  postgresOnly('PostgreSQL claims: runs are never read unclaimed there, and a lease read so could not be committed', async () => {
    const ws = await env.workspace();
    const runId = await scheduledRun(ws);
    const now = new Date().toISOString();
    await expect(readDueRuns(env.db, { now, limit: 10, skip: [] })).rejects.toThrow(/SQLite only/);
    await expect(commitBatch(env.db, [firstWrite(readLease(runId), now)])).rejects.toThrow(/PostgreSQL/);
    expect(await runRow(runId)).toMatchObject({ automation_status: 'scheduled', lease_owner: null, lease_fence: 0 });
    // Its worker claims and completes the run as always.
    expect(await testWorker(env).drain()).toBeGreaterThanOrEqual(1);
    expect(await runRow(runId)).toMatchObject({ automation_status: 'completed', lease_fence: 1 });
  });
});
