/**
 * A worker whose claim succeeded but whose next reads failed, and whose release failed as well
 * (the database connection dropped: an on-call review terminated every backend under load). The
 * runs must come free when their lease runs out; the heartbeat kept extending them instead.
 */
import { expect, it, vi } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { chain, fire, getRun, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { ManualClock } from '../../src/lib/clock.js';

const failNext = vi.hoisted(() => ({ load: 0, release: 0 }));
const dropped = () => Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });

vi.mock('../../src/engine/run-loader.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/engine/run-loader.js')>();
  return {
    ...original,
    loadClaimedRuns: (...args: Parameters<typeof original.loadClaimedRuns>) =>
      failNext.load-- > 0 ? Promise.reject(dropped()) : original.loadClaimedRuns(...args),
  };
});
vi.mock('../../src/engine/sql/release-run.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/engine/sql/release-run.js')>();
  return {
    ...original,
    releaseRun: (...args: Parameters<typeof original.releaseRun>) => (failNext.release-- > 0 ? Promise.reject(dropped()) : original.releaseRun(...args)),
  };
});

const clock = new ManualClock('2030-04-01T10:00:00.000Z');

describeEachStore(
  'engine: a claim whose reads and release fail',
  (env) => {
    it('holds nothing afterwards: the heartbeat does not keep the lease, which runs out, and another worker runs the run', async () => {
      const ws = await env.workspace();
      const { triggerId } = await webTriggerFor(ws, chain('Dropped', [{ id: 'only', automations: [{ id: 'x', type: 'set', with: { vars: { x: '1' } } }] }]));
      const runId = await fire(ws, triggerId);
      const unlucky = testWorker(env, { leaseMs: 5_000 });
      failNext.load = 1;
      failNext.release = 1;
      await expect(unlucky.runOnce()).rejects.toThrow(/administrator command/);
      const leased = await env.db.selectFrom('runs').select(['lease_owner', 'available_at']).where('id', '=', runId).executeTakeFirstOrThrow();
      expect(leased.lease_owner).not.toBeNull();

      // Its heartbeat comes round after the lease's end: it must not extend a run it let go.
      clock.advance(6_000);
      await (unlucky as unknown as { beat(): Promise<void> }).beat();
      const after = await env.db.selectFrom('runs').select(['available_at']).where('id', '=', runId).executeTakeFirstOrThrow();
      expect(after.available_at).toBe(leased.available_at);

      await testWorker(env).drain();
      expect((await getRun(ws, runId)).automationStatus).toBe('completed');
      await unlucky.stop();
    });
  },
  { clock },
);
