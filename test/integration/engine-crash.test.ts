/**
 * Crashes for real: worker processes are SIGKILLed in the middle of http calls and waits, and
 * other processes finish their runs from the last recorded step once the leases expire. A
 * ledger HTTP server counts requests per idempotency key: every key must arrive, and a key may
 * arrive more than once only for a step whose earlier attempt never recorded its outcome.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { fire, webTriggerFor } from '../helpers/engine-harness.js';
import { LedgerServer } from '../helpers/ledger-server.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { endEngineWorker, spawnEngineWorker, type WorkerProcess } from '../helpers/engine-worker-spawn.js';
import { until as waitUntil } from '../helpers/until.js';

const LEASE_MS = 1000;



const spawnWorker = (env: TestEnv, id: string): Promise<WorkerProcess> => spawnEngineWorker(env, id, LEASE_MS);

const kill = (worker: WorkerProcess): Promise<void> => endEngineWorker(worker, 'SIGKILL');

/** Waits for `check` (20 s at most, polled every 50 ms). */
const until = (check: () => Promise<boolean> | boolean, what: string, timeoutMs = 20_000) => waitUntil(check, what, timeoutMs, 50);

async function statuses(env: TestEnv, runIds: string[]): Promise<Map<string, string>> {
  const rows = await env.db.selectFrom('runs').select(['id', 'automation_status']).where('id', 'in', runIds).execute();
  return new Map(rows.map((row) => [row.id, row.automation_status]));
}

/** Every key arrived; more than once only where earlier attempts were recorded as interrupted. */
async function checkLedger(env: TestEnv, ledger: LedgerServer, runIds: string[], node: string, automation: string) {
  const counts = ledger.countByKey();
  const steps = await env.db
    .selectFrom('run_steps')
    .select(['run_id', 'attempt', 'outcome'])
    .where('run_id', 'in', runIds)
    .where('automation_id', '=', automation)
    .execute();
  let repeated = 0;
  for (const runId of runIds) {
    const key = `${runId}:${node}:${automation}`;
    const sent = counts.get(key) ?? 0;
    const attempts = steps.filter((s) => s.run_id === runId);
    expect(sent, key).toBeGreaterThanOrEqual(1);
    expect(attempts.filter((s) => s.outcome === 'ok'), key).toHaveLength(1);
    expect(attempts.every((s) => s.outcome === 'ok' || s.outcome === 'interrupted'), key).toBe(true);
    // A repeat is allowed only for an attempt whose outcome was never recorded.
    expect(sent, key).toBeLessThanOrEqual(attempts.length);
    if (sent > 1) repeated++;
  }
  return repeated;
}

for (const kind of STORE_KINDS) {
  describe(`engine crash recovery [${kind}]`, () => {
    const env = new TestEnv(kind, { env: { CAREPATH_HTTP_ALLOW: '127.0.0.1' } });
    const ledger = new LedgerServer();
    const workers: WorkerProcess[] = [];
    let ws: TestWorkspace;

    beforeAll(async () => {
      await env.start();
      await ledger.listen();
      ws = await env.workspace();
    });
    afterAll(async () => {
      await Promise.all(workers.map(kill));
      await ledger.close();
      await env.stop();
    });

    it('a worker killed mid-http and mid-wait: another finishes every run; each call arrives, repeated only if unrecorded', async () => {
      // Slow answers, so the kill lands while calls are in flight.
      ledger.on('/slow', { status: 200, delayMs: 1_500 });
      ledger.on('/after-wait', { status: 200 });
      const callFirst = await webTriggerFor(ws, {
        name: `Call first ${kind}`,
        nodes: [
          { id: 'start', kind: 'start' },
          { id: 'call', kind: 'action', automations: [{ id: 'post', type: 'http', with: { method: 'POST', url: ledger.url('/slow'), body: { n: '{{payload.n}}' } } }] },
          { id: 'after', kind: 'action', automations: [{ id: 'mark', type: 'set', with: { vars: { done: 'true' } } }] },
          { id: 'done', kind: 'end' },
        ],
        links: [{ from: 'start', to: 'call' }, { from: 'call', to: 'after' }, { from: 'after', to: 'done' }],
      });
      const waitFirst = await webTriggerFor(ws, {
        name: `Wait first ${kind}`,
        nodes: [
          { id: 'start', kind: 'start' },
          { id: 'nap', kind: 'action', automations: [{ id: 'pause', type: 'wait', with: { duration: 'PT2S' } }] },
          { id: 'call', kind: 'action', automations: [{ id: 'ping', type: 'http', with: { method: 'POST', url: ledger.url('/after-wait') } }] },
          { id: 'done', kind: 'end' },
        ],
        links: [{ from: 'start', to: 'nap' }, { from: 'nap', to: 'call' }, { from: 'call', to: 'done' }],
      });
      const calls = await Promise.all(Array.from({ length: 8 }, (_, n) => fire(ws, callFirst.triggerId, { n })));
      const waits = await Promise.all(Array.from({ length: 8 }, () => fire(ws, waitFirst.triggerId)));

      const first = await spawnWorker(env, `${kind}-first`);
      workers.push(first);
      await until(() => calls.every((runId) => ledger.countByKey().has(`${runId}:call:post`)), 'every call to be in flight');
      await until(async () => {
        const open = await env.db.selectFrom('run_steps').select('run_id').where('run_id', 'in', waits).where('finished_at', 'is', null).execute();
        return open.length === waits.length;
      }, 'every wait to have started');
      await kill(first);

      const second = await spawnWorker(env, `${kind}-second`);
      workers.push(second);
      await until(async () => [...(await statuses(env, [...calls, ...waits])).values()].every((s) => s === 'completed'), 'every run to complete');

      // The first worker died with its calls in flight: those were made again, with the same key.
      expect(await checkLedger(env, ledger, calls, 'call', 'post')).toBeGreaterThan(0);
      expect(await checkLedger(env, ledger, waits, 'call', 'ping')).toBe(0);
      const waitSteps = await env.db.selectFrom('run_steps').select(['outcome', 'attempt']).where('run_id', 'in', waits).where('automation_id', '=', 'pause').execute();
      expect(waitSteps.every((s) => s.outcome === 'elapsed' && s.attempt === 1)).toBe(true);
      await kill(second);
    });

    if (kind === 'postgres') {
      it('three worker processes share 200 runs; one is killed under load; every run ends once', async () => {
        ledger.on('/load', { status: 200, delayMs: 20 });
        const load = await webTriggerFor(ws, {
          name: 'Load',
          nodes: [
            { id: 'start', kind: 'start' },
            { id: 'prep', kind: 'action', automations: [{ id: 'v', type: 'set', with: { vars: { n: 'payload.n' } } }] },
            { id: 'call', kind: 'action', automations: [{ id: 'post', type: 'http', with: { method: 'POST', url: ledger.url('/load'), body: { n: '{{vars.n}}' } } }] },
            { id: 'done', kind: 'end' },
          ],
          links: [{ from: 'start', to: 'prep' }, { from: 'prep', to: 'call' }, { from: 'call', to: 'done' }],
        });
        const pool = await Promise.all(['a', 'b', 'c'].map((id) => spawnWorker(env, `load-${id}`)));
        workers.push(...pool);
        const runIds: string[] = [];
        for (let batch = 0; batch < 4; batch++) {
          runIds.push(...(await Promise.all(Array.from({ length: 50 }, (_, i) => fire(ws, load.triggerId, { n: batch * 50 + i })))));
        }
        const seen = () => runIds.filter((runId) => ledger.countByKey().has(`${runId}:call:post`)).length;
        await until(() => seen() >= 60, 'a third of the calls');
        await kill(pool[0]);
        const replacement = await spawnWorker(env, 'load-d');
        workers.push(replacement);
        await until(async () => [...(await statuses(env, runIds)).values()].filter((s) => s === 'completed').length === runIds.length, 'all 200 runs', 30_000);
        await checkLedger(env, ledger, runIds, 'call', 'post');
        // No run was ever executed by two workers at once: each step has one successful attempt
        // (checked above) and every `set` step ran exactly once.
        const sets = await env.db.selectFrom('run_steps').select('run_id').where('run_id', 'in', runIds).where('automation_id', '=', 'v').execute();
        expect(sets).toHaveLength(runIds.length);
        const owners = await env.db.selectFrom('runs').select('lease_owner').where('id', 'in', runIds).where('lease_owner', 'is not', null).execute();
        expect(owners).toEqual([]);
      });
    }
  });
}
