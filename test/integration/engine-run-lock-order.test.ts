/**
 * A worker's group commit and an event's wake both lock several runs' rows: the commit the runs
 * of its batch, the wake every run of the patient waiting for the event (engine/event-waits.ts,
 * in id order). Two runs of one patient, both waiting for the discharge in one branch while the
 * other branch works, are written in one batch while the discharge's wake comes: the batch must
 * take their rows in the wake's order, or each holds one row and waits for the other.
 *
 * The interleaving is made certain on PostgreSQL: a third connection holds the lower run's row
 * until the wake waits for it and the batch waits too; then lets go. SQLite runs one write
 * transaction at a time: there the two only follow each other.
 */
import { expect, it } from 'vitest';
import pg from 'pg';
import { describeEachStore } from '../helpers/test-env.js';
import { chain, fire, getRun, getSteps, patient, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { claimRuns } from '../../src/engine/sql/claim-runs.js';
import { releaseRun } from '../../src/engine/sql/release-run.js';
import { commitBatch, type StepWrite } from '../../src/engine/step-committer.js';
import { wakeRunsWaitingFor } from '../../src/engine/event-waits.js';
import { addMs } from '../../src/lib/clock.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describeEachStore('engine: a batch of steps and a wake lock runs in one order', (env) => {
  for (const path of ['one-statement', 'transaction'] as const) {
    it(`a batch writing two waiting runs of one patient, in descending id order, and the wake of their event both commit (${path} commit)`, async () => {
      const ws = await env.workspace();
      const extId = `lock-order-${path}`;
      const subjectId = await patient(env, ws, extId);
      const { triggerId } = await webTriggerFor(ws, chain(`Lock order ${path}`, [
        { id: 'w', automations: [{ id: 'visit', type: 'wait_for_event', with: { event: 'Encounter.finished' } }] },
      ]));
      const fired = [await fire(ws, triggerId, { subject: { reference: `Patient/${extId}` } }), await fire(ws, triggerId, { subject: { reference: `Patient/${extId}` } })];
      await testWorker(env).drain();
      const [low, high] = [...fired].sort();

      // Both runs waiting, and held by one worker (as when their other branches are at work).
      await env.db.updateTable('runs').set({ available_at: '2000-01-01T00:00:00.000Z' }).where('id', 'in', fired).execute();
      const now = new Date().toISOString();
      const claimed = await claimRuns(env.db, { owner: 'batching', now, leaseUntil: addMs(now, 60_000), limit: 10 });
      // The lower run's row written last, so that it comes last in the table too, not only in
      // the batch (a plan may take the rows in either order).
      await env.db.updateTable('runs').set((eb) => ({ wake_seq: eb.ref('wake_seq') })).where('id', '=', low).execute();
      const held = (runId: string) => {
        const row = claimed.find((candidate) => candidate.id === runId)!;
        return { lease: { runId, owner: 'batching', fence: row.lease_fence }, state: row.engine_state! };
      };
      // The run with the higher id first: the order a batch has when that run's write came first.
      const batch: StepWrite[] = [high, low].map((runId) => ({
        lease: held(runId).lease,
        at: new Date().toISOString(),
        from: 'running',
        state: held(runId).state,
        requireRunning: true,
        // An effect sends the batch through the transaction instead of the one statement.
        ...(path === 'transaction' ? { effect: async () => undefined } : {}),
      }));
      const wake = () =>
        wakeRunsWaitingFor(env.db, { workspaceId: ws.workspaceId, subjectRecordId: subjectId, event: 'Encounter.finished', eventPayload: { n: 1 }, at: new Date().toISOString() });

      let outcomes: PromiseSettledResult<unknown>[];
      if (env.kind === 'sqlite') {
        outcomes = await Promise.allSettled([wake(), commitBatch(env.db, batch)]);
      } else {
        const locker = new pg.Client({ connectionString: env.container.config.databaseUrl, options: `-c search_path=${env.schema}` });
        await locker.connect();
        // The backends waiting behind these, once there are `count` of them (other files' tests
        // share the database: only waits on this connection, or on the ones found, count).
        const waitingBehind = async (count: number, pids: number[]): Promise<number[]> => {
          for (let i = 0; i < 500; i++) {
            const { rows } = await locker.query<{ pid: number }>('select pid from pg_stat_activity where pg_blocking_pids(pid) && $1::int[] order by pid', [pids]);
            if (rows.length >= count) return rows.map((row) => row.pid);
            await sleep(10);
          }
          throw new Error('nothing waited');
        };
        try {
          await locker.query('begin');
          await locker.query('select 1 from runs where id = $1 for update', [low]);
          const lockerPid = (await locker.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
          // The wake queues for the lower run first; the batch comes next.
          const woken = wake();
          const [wakePid] = await waitingBehind(1, [lockerPid]);
          const committed = commitBatch(env.db, batch);
          await waitingBehind(2, [lockerPid, wakePid]);
          await locker.query('commit');
          outcomes = await Promise.allSettled([woken, committed]);
        } finally {
          await locker.query('rollback').catch(() => undefined);
          await locker.end();
        }
      }
      // Neither was rolled back to break a deadlock.
      expect(outcomes.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : String(outcome.reason)))).toEqual([2, new Set([low, high])]);

      // The worker lets go; the runs see the event and complete.
      for (const runId of fired) expect(await releaseRun(env.db, held(runId).lease, { availableAt: new Date().toISOString() })).toBe(true);
      await testWorker(env).drain();
      for (const runId of fired) {
        expect((await getRun(ws, runId)).automationStatus).toBe('completed');
        expect((await getSteps(ws, runId)).map((step) => [step.automationId, step.attempt, step.outcome])).toEqual([['visit', 1, 'event']]);
      }
    });
  }
});
