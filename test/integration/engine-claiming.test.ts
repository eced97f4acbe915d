/**
 * The claim loop of a started worker: how much it claims when its slots are partly taken, that
 * an execution leaving room wakes it (no waiting for a poll), and the PostgreSQL wake-ups
 * between processes (store-signals.ts).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { chain, fire, getRun, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { LedgerServer } from '../helpers/ledger-server.js';
import { startStoreSignals } from '../../src/engine/store-signals.js';
import { until as waitUntil } from '../helpers/until.js';

const ledger = new LedgerServer();
beforeAll(() => ledger.listen());
afterAll(() => ledger.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits for `check` (5 s at most, polled every 10 ms). */
const until = (check: () => boolean | Promise<boolean>, what: string, ms = 5_000) => waitUntil(check, what, ms, 10);

describeEachStore('engine: claiming', (env) => {
  const callChain = (name: string, path: string) =>
    chain(name, [{ id: 'call', automations: [{ id: 'get', type: 'http', with: { method: 'GET', url: ledger.url(path) } }] }]);

  it('with some slots taken, a worker claims what fits (half a batch or more) instead of waiting for a whole batch', async () => {
    const ws = await env.workspace();
    const slow = `/slow-${env.kind}`;
    const fast = `/fast-${env.kind}`;
    ledger.on(slow, { status: 200, delayMs: 3_000 });
    ledger.on(fast, { status: 200 });
    const slowTrigger = await webTriggerFor(ws, callChain('Slow', slow));
    const fastTrigger = await webTriggerFor(ws, callChain('Fast', fast));
    // 6 slots, batches of 4: with 3 slow runs in their calls, 3 slots are free (less than a batch).
    const worker = testWorker(env, { concurrency: 6, batchSize: 4, pollMs: 60_000 });
    const slowRuns = await Promise.all([1, 2, 3].map(() => fire(ws, slowTrigger.triggerId)));
    worker.start();
    try {
      await until(() => ledger.requests.filter((r) => r.path === slow).length === 3, 'the slow calls');
      const fastRuns = await Promise.all([1, 2, 3].map(() => fire(ws, fastTrigger.triggerId)));
      // The fire's local signal wakes the worker; the fast runs must not wait for the slow ones.
      await until(async () => (await Promise.all(fastRuns.map((id) => getRun(ws, id)))).every((run) => run.automationStatus === 'completed'), 'the fast runs', 2_000);
      expect((await Promise.all(slowRuns.map((id) => getRun(ws, id)))).map((run) => run.automationStatus)).toEqual(['running', 'running', 'running']);
    } finally {
      await worker.stop();
      // A stopped worker lets go of calls that would try again (their 3 s answers time out);
      // canceled, they do not take the next test's worker's slots.
      for (const runId of slowRuns) await ws.call('POST', `/v1/runs/${runId}/cancel`);
    }
  });

  it('an execution that leaves room wakes the claim loop: no waiting for the next poll', async () => {
    const ws = await env.workspace();
    const path = `/room-${env.kind}`;
    ledger.on(path, { status: 200, delayMs: 150 });
    const { triggerId } = await webTriggerFor(ws, callChain('Room', path));
    const runIds = await Promise.all(Array.from({ length: 8 }, () => fire(ws, triggerId)));
    // Two slots, a poll far away: the 8 runs go through only if ending runs wake the loop.
    const worker = testWorker(env, { concurrency: 2, batchSize: 2, pollMs: 60_000 });
    worker.start();
    try {
      await until(async () => (await Promise.all(runIds.map((id) => getRun(ws, id)))).every((run) => run.automationStatus === 'completed'), 'every run', 5_000);
    } finally {
      await worker.stop();
    }
  });

  it('a runs signal reaches the processes that listen (PostgreSQL), and a burst of signals wakes them without a NOTIFY each', async () => {
    let wakes = 0;
    const listening = await startStoreSignals(env.container, () => wakes++);
    try {
      if (env.kind === 'sqlite') {
        // One process by rule: nothing to forward, nothing to hear.
        env.container.signals.notify('runs');
        await sleep(50);
        expect(wakes).toBe(0);
        return;
      }
      await until(() => wakes >= 1, 'the wake-up on listening');
      const before = wakes;
      env.container.signals.notify('runs');
      await until(() => wakes > before, 'the notification');
      const afterOne = wakes;
      for (let i = 0; i < 200; i++) env.container.signals.notify('runs');
      await until(() => wakes > afterOne, 'the burst');
      await sleep(200);
      // Signals that come while a NOTIFY is on its way share the next one.
      expect(wakes - afterOne).toBeLessThan(50);
    } finally {
      await listening.close();
    }
  });
}, { env: { CAREPATH_HTTP_ALLOW: '127.0.0.1' } });
