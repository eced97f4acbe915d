import { afterAll, beforeAll, expect, it } from 'vitest';
import pg from 'pg';
import { describeEachStore, type TestWorkspace } from '../helpers/test-env.js';
import { chain, fire, getRun, getSteps, recordTags, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { LedgerServer } from '../helpers/ledger-server.js';
import { claimRuns } from '../../src/engine/sql/claim-runs.js';
import { commitBatch, StepCommitter, takeBatch, type StepWrite } from '../../src/engine/step-committer.js';
import type { Lease } from '../../src/engine/sql/lease.js';
import { releaseRun } from '../../src/engine/sql/release-run.js';
import { extendLeases } from '../../src/engine/sql/extend-leases.js';
import { setRunStatus } from '../../src/engine/run-transitions.js';
import { addMs, ManualClock } from '../../src/lib/clock.js';
import { RunWorker } from '../../src/engine/worker.js';
import { engineServices } from '../../src/engine/engine-services.js';
import { giveBackLeasesOfDeadProcesses } from '../../src/storage/dead-process-leases.js';

const ledger = new LedgerServer();
beforeAll(() => ledger.listen());
afterAll(() => ledger.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await sleep(10);
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

describeEachStore('engine: leases and fencing', (env) => {
  /**
   * One guarded write, as a worker commits it (on PostgreSQL a plain write takes the one-statement
   * commit, any other the transaction); answers whether it was applied.
   */
  const write = async (lease: Lease, extra: Partial<StepWrite> = {}) => {
    const applied = await commitBatch(env.db, [{ lease, at: new Date().toISOString(), from: 'running', state: '{"v":1}', requireRunning: true, ...extra }]);
    return applied.has(lease.runId);
  };
  const stepRow = (runId: string, id: string) => ({
    id, run_id: runId, node_id: 'a', automation_id: 's', automation_type: 'set', attempt: 1,
    started_at: new Date().toISOString(), finished_at: null, outcome: null, output: null, error: null,
  });

  const oneSet = chain('One set', [{ id: 'a', automations: [{ id: 's', type: 'set', with: { vars: { x: '1' } } }] }]);

  it('claims raise the fence; a worker whose lease was taken can write nothing, the new holder can', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, oneSet);
    const runId = await fire(ws, triggerId);
    const db = env.db;
    const now = new Date().toISOString();
    const claimAs = (owner: string, at: string) =>
      claimRuns(db, { owner, now: at, leaseUntil: addMs(at, 1_000), limit: 100 }).then((rows) => rows.find((r) => r.id === runId));

    const first = await claimAs('worker-a', now);
    expect(first).toBeDefined();
    expect(await setRunStatus(db, { runId, from: 'scheduled', to: 'running', at: now })).toBe(true);
    expect(await claimAs('worker-b', addMs(now, 500))).toBeUndefined();
    const second = await claimAs('worker-b', addMs(now, 1_001));
    expect(second?.lease_fence).toBe(first!.lease_fence + 1);

    const stale = { runId, owner: 'worker-a', fence: first!.lease_fence };
    const current = { runId, owner: 'worker-b', fence: second!.lease_fence };
    expect(await write(stale)).toBe(false);
    expect(await write(stale, { requireRunning: false })).toBe(false);
    expect(await write(stale, { insertStep: stepRow(runId, '0190a1b2-c3d4-7e5f-8a9b-000000000001') })).toBe(false);
    expect(await write(stale, { end: { status: 'completed', error: null } })).toBe(false);
    expect(await db.selectFrom('run_steps').select('id').where('run_id', '=', runId).execute()).toEqual([]);
    expect((await extendLeases(db, [stale], addMs(now, 60_000))).size).toBe(0);
    expect(await releaseRun(db, stale, { availableAt: now })).toBe(false);
    expect(await setRunStatus(db, { runId, from: 'running', to: 'completed', at: now, endLease: stale })).toBe(false);
    expect(await setRunStatus(db, { runId, from: 'running', to: 'errored', at: now, error: { message: 'x', nodeId: 'a' }, endLease: stale })).toBe(false);
    expect((await getRun(ws, runId)).automationStatus).toBe('running');
    // A stale worker claiming with its own id again gets a new fence, never the old one back.
    expect(first!.lease_fence).not.toBe(second!.lease_fence);

    // A release to sleep does not happen past a wake-up the worker has not seen.
    const seq = (await db.selectFrom('runs').select('wake_seq').where('id', '=', runId).executeTakeFirstOrThrow()).wake_seq;
    expect(await releaseRun(db, current, { availableAt: addMs(now, 60_000), wakeSeq: seq + 1 })).toBe(false);
    expect(await write(current, { insertStep: stepRow(runId, '0190a1b2-c3d4-7e5f-8a9b-000000000002') })).toBe(true);
    expect(await db.selectFrom('run_steps').select('id').where('run_id', '=', runId).execute()).toHaveLength(1);
    expect([...(await extendLeases(db, [current], addMs(now, 60_000)))]).toEqual([runId]);
    expect(await setRunStatus(db, { runId, from: 'running', to: 'completed', at: now, endLease: current })).toBe(true);
    const row = await db.selectFrom('runs').select(['automation_status', 'lease_owner']).where('id', '=', runId).executeTakeFirstOrThrow();
    expect(row).toEqual({ automation_status: 'completed', lease_owner: null });
  });

  it('a worker that took a run again under its own stalled execution: the stale write is never batched with the new one, and writes nothing', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, oneSet);
    const runId = await fire(ws, triggerId);
    const db = env.db;
    const now = new Date().toISOString();
    const claim = (at: string) => claimRuns(db, { owner: 'worker-a', now: at, leaseUntil: addMs(at, 1_000), limit: 100 }).then((rows) => rows.find((r) => r.id === runId)!);
    const first = await claim(now);
    // Its lease ran out while it stalled, and the same worker's claim took the run again.
    const second = await claim(addMs(now, 1_001));
    expect(second.lease_fence).toBe(first.lease_fence + 1);
    const at = addMs(now, 1_002);
    const write = (fence: number, stepId: string): StepWrite => ({
      lease: { runId, owner: 'worker-a', fence }, at, from: 'scheduled', state: `{"v":${fence}}`, requireRunning: true,
      insertStep: { ...stepRow(runId, stepId), finished_at: at, outcome: 'ok' },
    });
    // Both reach the group commit in one turn, the stale one first: in one batch its step row
    // rode on the new write's guard and it was told it was applied (a call recorded ok twice).
    const committer = new StepCommitter(db);
    const [stale, current] = await Promise.all([
      committer.submit(write(first.lease_fence, '0190a1b2-c3d4-7e5f-8a9b-000000000021')),
      committer.submit(write(second.lease_fence, '0190a1b2-c3d4-7e5f-8a9b-000000000022')),
    ]);
    expect([stale, current]).toEqual([false, true]);
    const steps = await db.selectFrom('run_steps').select('id').where('run_id', '=', runId).execute();
    expect(steps.map((step) => step.id)).toEqual(['0190a1b2-c3d4-7e5f-8a9b-000000000022']);
    const row = await db.selectFrom('runs').select(['engine_state', 'lease_fence']).where('id', '=', runId).executeTakeFirstOrThrow();
    expect(row).toEqual({ engine_state: `{"v":${second.lease_fence}}`, lease_fence: second.lease_fence });
  });

  it('never puts two writes of one run in a batch, keeping their order', () => {
    const pending = (runId: string, alone = false) => ({ write: { lease: { runId, owner: 'w', fence: 1 }, ...(alone ? { alone } : {}) } });
    const queue = [pending('a'), pending('b'), pending('a'), pending('c'), pending('d', true)];
    expect(takeBatch(queue, 200).map((p) => p.write.lease.runId)).toEqual(['a', 'b']);
    expect(takeBatch(queue, 200).map((p) => p.write.lease.runId)).toEqual(['a', 'c']);
    expect(takeBatch(queue, 200).map((p) => p.write.lease.runId)).toEqual(['d']);
    expect(queue).toEqual([]);
  });

  /**
   * Two runs claimed by worker-a and a batch that completes both, each with a step row: the
   * first on its fence, the second one fence back (stale). With `effectOf`, each write carries an
   * effect, which sends the batch through the transaction instead of the plain-write commit.
   */
  async function passingAndStale(ws: TestWorkspace, stepIds: [string, string], effectOf?: (runId: string) => () => Promise<void>) {
    const { triggerId } = await webTriggerFor(ws, oneSet);
    const [passing, stale] = [await fire(ws, triggerId), await fire(ws, triggerId)];
    const now = new Date().toISOString();
    const rows = await claimRuns(env.db, { owner: 'worker-a', now, leaseUntil: addMs(now, 60_000), limit: 100 });
    const fenceOf = (runId: string) => rows.find((row) => row.id === runId)!.lease_fence;
    const at = addMs(now, 5);
    const write = (runId: string, fence: number, insertStep: StepWrite['insertStep']): StepWrite => ({
      lease: { runId, owner: 'worker-a', fence }, at, from: 'scheduled', state: '{"v":2}', requireRunning: true,
      end: { status: 'completed', error: null }, insertStep, ...(effectOf && { effect: effectOf(runId) }),
    });
    const batch = [
      write(passing, fenceOf(passing), { ...stepRow(passing, stepIds[0]), finished_at: at, outcome: 'ok' }),
      write(stale, fenceOf(stale) - 1, stepRow(stale, stepIds[1])),
    ];
    return { passing, stale, at, batch, fenceOf };
  }

  it('a batch commits each run on its own guard: the run that passed moves, with its step and status tag; the stale one writes nothing', async () => {
    const ws = await env.workspace();
    const { passing, stale, at, batch } = await passingAndStale(ws, ['0190a1b2-c3d4-7e5f-8a9b-000000000011', '0190a1b2-c3d4-7e5f-8a9b-000000000012']);
    expect([...(await commitBatch(env.db, batch))]).toEqual([passing]);

    const run = await env.db.selectFrom('runs').select(['automation_status', 'lease_owner', 'engine_state', 'updated_at']).where('id', '=', passing).executeTakeFirstOrThrow();
    expect(run).toEqual({ automation_status: 'completed', lease_owner: null, engine_state: '{"v":2}', updated_at: at });
    expect(await recordTags(env, passing)).toContain('completed');
    expect(await recordTags(env, passing)).not.toContain('scheduled');
    const record = await env.db.selectFrom('records').select('updated_at').where('id', '=', passing).executeTakeFirstOrThrow();
    expect(record.updated_at).toBe(at);
    expect((await getSteps(ws, passing)).map((step) => step.outcome)).toEqual(['ok']);

    expect((await getRun(ws, stale)).automationStatus).toBe('scheduled');
    expect(await recordTags(env, stale)).toContain('scheduled');
    expect(await getSteps(ws, stale)).toEqual([]);
  });

  it('a batch that takes the transaction (writes with effects) also commits each run on its own fence: the stale one writes nothing, its effect does not run', async () => {
    // A write with an effect is not plain, so the batch goes through the Kysely transaction and
    // its guarded UPDATE, not the one-statement (PostgreSQL) or prepared (SQLite) commit the test
    // above takes. The stale write names the owner that holds the run, one fence back: only an
    // exact fence match may pass, or a worker that lost the run and claimed it again would write
    // over its own newer claim.
    const ws = await env.workspace();
    const effects: string[] = [];
    const { passing, stale, at, batch, fenceOf } = await passingAndStale(ws, ['0190a1b2-c3d4-7e5f-8a9b-000000000021', '0190a1b2-c3d4-7e5f-8a9b-000000000022'], (runId) => async () => {
      effects.push(runId);
    });
    expect([...(await commitBatch(env.db, batch))]).toEqual([passing]);
    expect(effects).toEqual([passing]);

    const run = await env.db.selectFrom('runs').select(['automation_status', 'lease_owner', 'engine_state', 'updated_at']).where('id', '=', passing).executeTakeFirstOrThrow();
    expect(run).toEqual({ automation_status: 'completed', lease_owner: null, engine_state: '{"v":2}', updated_at: at });
    expect(await recordTags(env, passing)).toContain('completed');
    expect((await getSteps(ws, passing)).map((step) => step.outcome)).toEqual(['ok']);

    // The stale run is as the claim left it: scheduled, still leased at its fence, no progress.
    const untouched = await env.db.selectFrom('runs').select(['automation_status', 'lease_owner', 'lease_fence', 'engine_state']).where('id', '=', stale).executeTakeFirstOrThrow();
    expect(untouched).toEqual({ automation_status: 'scheduled', lease_owner: 'worker-a', lease_fence: fenceOf(stale), engine_state: null });
    expect(await recordTags(env, stale)).toContain('scheduled');
    expect(await env.db.selectFrom('run_steps').select('id').where('run_id', '=', stale).execute()).toEqual([]);
  });

  /**
   * A run whose http call is in flight with a stale worker (long lease) when its lease runs out
   * (as if the worker had stalled) and a fresh worker claims and finishes it. The ledger answers
   * `path` with `replies` in order; the stale worker's outbound settings (its backoff) are
   * `staleOutbound`, the new holder's `freshOutbound`. The two workers' ids are `workerIds` (two
   * processes given the same worker id share one).
   */
  async function takenOverMidCall(
    name: string,
    replies: Parameters<LedgerServer['on']>[1][],
    staleOutbound: Parameters<typeof testWorker>[2] = {},
    { workerIds = ['stale', 'fresh'], freshOutbound = {} }: { workerIds?: [stale: string, fresh: string]; freshOutbound?: Parameters<typeof testWorker>[2] } = {},
  ) {
    const ws = await env.workspace();
    const path = `/${name}-${env.kind}`;
    ledger.on(path, ...replies);
    const { triggerId } = await webTriggerFor(ws, chain(name, [
      { id: 'call', automations: [{ id: 'post', type: 'http', with: { method: 'POST', url: ledger.url(path), body: {} } }] },
    ]));
    const runId = await fire(ws, triggerId);
    const stale = testWorker(env, { workerId: workerIds[0], leaseMs: 60_000 }, staleOutbound);
    const fresh = testWorker(env, { workerId: workerIds[1] }, freshOutbound);
    const before = ledger.requests.length;
    const staleRun = stale.runOnce();
    await until(() => ledger.requests.length > before, 'the first call');
    await env.db.updateTable('runs').set({ available_at: '2000-01-01T00:00:00.000Z' }).where('id', '=', runId).execute();
    expect(await fresh.runOnce()).toBe(1);
    return { ws, runId, staleRun, keysSent: () => ledger.requests.slice(before).map((r) => r.headers['idempotency-key']) };
  }

  it('a stale worker mid-call cannot complete, fail or write steps; the new holder repeats the call with the same key', async () => {
    // The stale worker's call ends in a 404 (it would error the run); the new holder's in a 200.
    const { ws, runId, staleRun, keysSent } = await takenOverMidCall('fenced', [{ status: 404, delayMs: 400 }, { status: 200, delayMs: 50 }]);
    await staleRun;
    expect(await getRun(ws, runId)).toMatchObject({ automationStatus: 'completed', error: null });
    const steps = await getSteps(ws, runId);
    expect(steps.map((s) => [s.attempt, s.outcome])).toEqual([[1, 'interrupted'], [2, 'ok']]);
    expect(keysSent()).toEqual([`${runId}:call:post`, `${runId}:call:post`]);
    const row = await env.db.selectFrom('runs').select(['lease_owner', 'engine_state']).where('id', '=', runId).executeTakeFirstOrThrow();
    expect(row.lease_owner).toBeNull();
    expect(JSON.parse(row.engine_state!).steps.post.outcome).toBe('ok');
  });

  /** The call was sent twice (the stale try, the new holder's), never a third time, and the run completed on the second. */
  async function expectCalledTwiceThenCompleted(ws: TestWorkspace, runId: string, staleRun: Promise<unknown>, keysSent: () => unknown[]) {
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    await staleRun;
    await sleep(200);
    expect(keysSent()).toEqual([`${runId}:call:post`, `${runId}:call:post`]);
    expect((await getSteps(ws, runId)).map((s) => [s.attempt, s.outcome])).toEqual([[1, 'interrupted'], [2, 'ok']]);
    expect(await getRun(ws, runId)).toMatchObject({ automationStatus: 'completed', error: null });
  }

  it('a stale worker whose try failed while it lost the run does not try again: the call is not sent a third time', async () => {
    // The stale worker's try answers 503 late (as a try that timed out in a stalled process);
    // the new holder's gets a 200. Another try from the stale worker would be a third request.
    const { ws, runId, staleRun, keysSent } = await takenOverMidCall('stalled', [{ status: 503, delayMs: 1_500 }, { status: 200, delayMs: 20 }], {
      backoff: { attempts: 4, baseMs: 50, maxMs: 50 },
    });
    await expectCalledTwiceThenCompleted(ws, runId, staleRun, keysSent);
  });

  it('a stale worker with the same worker id as the new holder knows the run is lost by its fence: the call is not sent a third time', async () => {
    // Both workers are `shared`: the owner alone cannot tell the stale one that the run was
    // taken; only the fence it claimed with can. The stale worker's try answers 503 late; it
    // looks whether it still holds the run before trying again, while the new holder's call
    // (answered 200 after 3 s, within its 10 s timeout) is still in flight, so the row names
    // `shared` as owner then. The margins are seconds, not milliseconds: the stale worker looks
    // about 1.5 s after its first call, the new holder's call is open until about 3 s after the
    // second.
    const { ws, runId, staleRun, keysSent } = await takenOverMidCall('same-id', [{ status: 503, delayMs: 1_500 }, { status: 200, delayMs: 3_000 }], {
      backoff: { attempts: 4, baseMs: 50, maxMs: 50 },
    }, { workerIds: ['shared', 'shared'], freshOutbound: { timeoutMs: 10_000 } });
    await expectCalledTwiceThenCompleted(ws, runId, staleRun, keysSent);
  }, 60_000);

  it('a worker that stalled past its lease before its first try sends nothing once another may hold the run', async () => {
    // The stale worker records the step, then stalls (here: reading the call's secret) longer
    // than its lease by its own clock, with no heartbeat in between, as a paused process or a
    // frozen VM does. Meanwhile another worker takes the run, makes the call and records `ok`.
    // Woken, the stale worker must not send its first try: that would be a repeat after a
    // recorded outcome (a soak found one in 28 stalls).
    const ws = await env.workspace();
    const path = `/first-try-stall-${env.kind}`;
    ledger.on(path, { status: 200, delayMs: 10 });
    const { triggerId } = await webTriggerFor(ws, chain('First try after a stall', [
      { id: 'call', automations: [{ id: 'post', type: 'http', with: { method: 'POST', url: ledger.url(path), headers: { Authorization: 'Bearer ${secrets.LAB_TOKEN}' }, body: {} } }] },
    ]));
    const runId = await fire(ws, triggerId);
    const token = async () => new Map([['LAB_TOKEN', 'token-1']]);
    let stalled = false;
    let wake!: () => void;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    const clock = new ManualClock();
    // A lease of a minute: no heartbeat falls inside the test, only the clock says it ran out.
    const stale = new RunWorker(
      {
        ...engineServices(env.container, {
          backoff: { attempts: 3, baseMs: 10, maxMs: 10 },
          timeoutMs: 2_000,
          secrets: async () => {
            stalled = true;
            await woken;
            return token();
          },
        }),
        clock,
      },
      { workerId: 'stalls', leaseMs: 60_000 },
    );
    const before = ledger.requests.length;
    const staleRun = stale.runOnce();
    await until(() => stalled, 'the stale worker stalled before its first try');
    clock.set(new Date(clock.now().getTime() + 61_000));
    await env.db.updateTable('runs').set({ available_at: '2000-01-01T00:00:00.000Z' }).where('id', '=', runId).execute();
    expect(await testWorker(env, { workerId: 'takes-over' }, { secrets: token }).runOnce()).toBe(1);
    expect(await getRun(ws, runId)).toMatchObject({ automationStatus: 'completed' });
    wake();
    await staleRun;
    await sleep(100);
    expect(ledger.requests.slice(before).map((r) => r.headers['idempotency-key'])).toEqual([`${runId}:call:post`]);
    expect((await getSteps(ws, runId)).map((s) => [s.attempt, s.outcome])).toEqual([[1, 'interrupted'], [2, 'ok']]);
    expect(await getRun(ws, runId)).toMatchObject({ automationStatus: 'completed', error: null });
  });

  it('a run held by a worker that died is taken over once its lease expires', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, oneSet);
    const runId = await fire(ws, triggerId);
    const now = new Date().toISOString();
    await claimRuns(env.db, { owner: 'dead', now, leaseUntil: addMs(now, 300), limit: 100 });
    const worker = testWorker(env);
    expect(await worker.drain()).toBe(0);
    await sleep(350);
    expect(await worker.drain()).toBe(1);
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
  });

  it('at the start of the one SQLite process, the leases a dead process left are given back at once, fences kept', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, oneSet);
    const runId = await fire(ws, triggerId);
    const now = new Date().toISOString();
    const [claimed] = await claimRuns(env.db, { owner: 'dead', now, leaseUntil: addMs(now, 30_000), limit: 100 });
    expect(claimed.id).toBe(runId);
    // (Runs left leased by this file's earlier tests are given back too: counts are not asserted.)
    const worker = testWorker(env);
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('scheduled');
    const givenBack = await giveBackLeasesOfDeadProcesses(env.db, new Date().toISOString());
    expect(givenBack.runs).toBeGreaterThanOrEqual(1);
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    const row = await env.db.selectFrom('runs').select(['lease_fence', 'lease_owner']).where('id', '=', runId).executeTakeFirstOrThrow();
    expect(row.lease_fence).toBe(claimed.lease_fence + 1);
    expect(row.lease_owner).toBeNull();
  });

  it('a heartbeat extends the leases of rows another transaction holds once it lets go, holding no other row meanwhile', async () => {
    // On PostgreSQL one statement extended every lease and waited for locks holding the rows it
    // had, and a worker's heartbeat and its own group commit deadlocked; one that skipped locked
    // rows instead let a lease run out when locks fell on two beats in a row.
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, oneSet);
    const [busyId, freeId] = [await fire(ws, triggerId), await fire(ws, triggerId)];
    const now = new Date().toISOString();
    const claimed = await claimRuns(env.db, { owner: 'beating', now, leaseUntil: addMs(now, 30_000), limit: 100 });
    const leaseOf = (runId: string) => ({ runId, owner: 'beating', fence: claimed.find((row) => row.id === runId)!.lease_fence });
    const availableAt = async (runId: string) => (await env.db.selectFrom('runs').select('available_at').where('id', '=', runId).executeTakeFirstOrThrow()).available_at;
    const both = [busyId, freeId].sort();
    if (env.kind === 'postgres') {
      const until = addMs(now, 50_000);
      const locker = new pg.Client({ connectionString: env.container.config.databaseUrl });
      await locker.connect();
      try {
        await locker.query('begin');
        await locker.query(`select id from ${env.schema}.runs where id = $1 for update`, [busyId]);
        const beat = extendLeases(env.db, [leaseOf(busyId), leaseOf(freeId)], until);
        await sleep(300);
        // The other transaction now wants the other row too (as a group commit would): the
        // heartbeat holds no lock on it while it waits, so this neither waits nor deadlocks.
        await locker.query(`update ${env.schema}.runs set wake_seq = wake_seq where id = $1`, [freeId]);
        expect(await availableAt(freeId)).toBe(until);
        await locker.query('commit');
        expect([...(await beat)].sort()).toEqual(both);
        expect(await availableAt(busyId)).toBe(until);
      } finally {
        await locker.query('rollback').catch(() => undefined);
        await locker.end();
      }
    }
    const until = addMs(now, 60_000);
    expect([...(await extendLeases(env.db, [leaseOf(busyId), leaseOf(freeId)], until))].sort()).toEqual(both);
    expect(await availableAt(busyId)).toBe(until);
    expect(await availableAt(freeId)).toBe(until);
    // A lease another worker holds now is not extended, and not answered.
    expect([...(await extendLeases(env.db, [{ ...leaseOf(busyId), fence: leaseOf(busyId).fence - 1 }], addMs(now, 90_000)))]).toEqual([]);
  });

  it('heartbeats keep a long step\'s lease: no one else claims the run meanwhile', async () => {
    const ws = await env.workspace();
    const path = `/long-${env.kind}`;
    ledger.on(path, { status: 200, delayMs: 900 });
    const { triggerId } = await webTriggerFor(ws, chain('Long', [
      { id: 'call', automations: [{ id: 'get', type: 'http', with: { method: 'GET', url: ledger.url(path) } }] },
    ]));
    const runId = await fire(ws, triggerId);
    const holder = testWorker(env, { workerId: 'holder', leaseMs: 200 });
    const other = testWorker(env, { workerId: 'other', leaseMs: 200 });
    const holding = holder.runOnce();
    let stolen = 0;
    for (let i = 0; i < 10; i++) {
      await sleep(100);
      stolen += await other.runOnce();
    }
    await holding;
    expect(stolen).toBe(0);
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    expect((await getSteps(ws, runId)).map((s) => [s.attempt, s.outcome])).toEqual([[1, 'ok']]);
  });

  it('two workers share the work; no run is executed twice', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Shared', [
      { id: 'a', automations: [{ id: 'x', type: 'set', with: { vars: { x: '1' } } }] },
      { id: 'b', automations: [{ id: 'y', type: 'set', with: { vars: { y: '2' } } }] },
    ]));
    const runIds = await Promise.all(Array.from({ length: 40 }, () => fire(ws, triggerId)));
    const a = testWorker(env, { workerId: 'a', batchSize: 5 });
    const b = testWorker(env, { workerId: 'b', batchSize: 5 });
    const [claimedA, claimedB] = await Promise.all([a.drain(), b.drain()]);
    // On SQLite both may read a run (each run's first write claims it, and only one such write
    // holds: src/engine/sql/claim-on-write.ts); on PostgreSQL a claim takes it from the other.
    if (env.kind === 'postgres') expect(claimedA + claimedB).toBe(40);
    else expect(claimedA + claimedB).toBeGreaterThanOrEqual(40);
    const statuses = await env.db.selectFrom('runs').select('automation_status').where('id', 'in', runIds).execute();
    expect(statuses.every((row) => row.automation_status === 'completed')).toBe(true);
    const steps = await env.db.selectFrom('run_steps').select(['run_id', 'attempt']).where('run_id', 'in', runIds).execute();
    expect(steps).toHaveLength(80);
    expect(steps.every((step) => step.attempt === 1)).toBe(true);
  });

  it('stop lets go of held runs at a step boundary; another worker finishes them at once', async () => {
    const ws = await env.workspace();
    const path = `/stop-${env.kind}`;
    ledger.on(path, { status: 200, delayMs: 200 });
    const { triggerId } = await webTriggerFor(ws, chain('Stopping', [
      { id: 'call', automations: [{ id: 'get', type: 'http', with: { method: 'GET', url: ledger.url(path) } }] },
      { id: 'after', automations: [{ id: 'x', type: 'set', with: { vars: { x: '1' } } }] },
    ]));
    const runId = await fire(ws, triggerId);
    const first = testWorker(env, { workerId: 'first', pollMs: 20 });
    first.start();
    await until(() => ledger.requests.some((r) => r.headers['idempotency-key'] === `${runId}:call:get`), 'the call');
    await first.stop();
    const row = await env.db.selectFrom('runs').select(['lease_owner', 'automation_status']).where('id', '=', runId).executeTakeFirstOrThrow();
    expect(row).toEqual({ lease_owner: null, automation_status: 'running' });
    expect((await getSteps(ws, runId)).map((s) => [s.automationId, s.outcome])).toEqual([['get', 'ok']]);
    await testWorker(env, { workerId: 'second' }).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
  });

  it('stop waits for a call in flight but not for its retries: the run is let go, and the next worker makes the call again', async () => {
    // A drain waited out every retry (four minutes with a partner that never answered).
    const ws = await env.workspace();
    const path = `/stop-retry-${env.kind}`;
    ledger.on(path, { status: 503, headers: { 'retry-after': '1' } });
    const { triggerId } = await webTriggerFor(ws, chain('Stopping mid-retries', [
      { id: 'call', automations: [{ id: 'get', type: 'http', with: { method: 'GET', url: ledger.url(path) } }] },
    ]));
    const runId = await fire(ws, triggerId);
    const sent = () => ledger.requests.filter((r) => r.path === path);
    const first = testWorker(env, { workerId: 'first-to-stop', pollMs: 20 }, { backoff: { attempts: 4, baseMs: 5, maxMs: 2_000 } });
    first.start();
    await until(() => sent().length === 1, 'the first try');
    const stopping = Date.now();
    await first.stop();
    expect(Date.now() - stopping).toBeLessThan(3_000);
    expect(sent()).toHaveLength(1);
    const row = await env.db.selectFrom('runs').select(['lease_owner', 'automation_status']).where('id', '=', runId).executeTakeFirstOrThrow();
    expect(row).toEqual({ lease_owner: null, automation_status: 'running' });
    ledger.on(path, { status: 200, body: { ok: true } });
    await testWorker(env, { workerId: 'after-the-stop' }).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    expect(new Set(sent().map((r) => r.headers['idempotency-key']))).toEqual(new Set([`${runId}:call:get`]));
    expect((await getSteps(ws, runId)).map((s) => [s.attempt, s.outcome])).toEqual([[1, 'interrupted'], [2, 'ok']]);
  });
}, { env: { CAREPATH_HTTP_ALLOW: '127.0.0.1' } });
