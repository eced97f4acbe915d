/**
 * A run whose execution fails unexpectedly (here: the store refuses its step rows, as a bug or a
 * broken store would) is not given up and not hammered: each failure in a row is counted on the
 * run and pushes its next try further out (5 s, 10 s, 20 s … at most 5 minutes), `/metrics`
 * counts it, and once it executes cleanly the count starts again.
 */
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { describeEachStore, simpleBlueprint, type TestEnv } from '../helpers/test-env.js';
import { fire, getRun, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { sample } from '../helpers/metrics.js';
import { afterFailure } from '../../src/engine/worker.js';

/** Every step row the engine writes is refused by the store until `heal()`. */
async function breakStepWrites(env: TestEnv): Promise<{ heal(): Promise<void> }> {
  if (env.kind === 'sqlite') {
    await sql`create trigger refuse_steps before insert on run_steps begin select raise(abort, 'injected: step rows refused'); end`.execute(env.db);
    return { heal: async () => void (await sql`drop trigger refuse_steps`.execute(env.db)) };
  }
  await sql`create function refuse_steps() returns trigger language plpgsql as $$ begin raise exception 'injected: step rows refused'; end $$`.execute(env.db);
  await sql`create trigger refuse_steps before insert on run_steps for each row execute function refuse_steps()`.execute(env.db);
  return {
    heal: async () => {
      await sql`drop trigger refuse_steps on run_steps`.execute(env.db);
      await sql`drop function refuse_steps()`.execute(env.db);
    },
  };
}

/** One automation, so executing the run writes a step row. */
const tagging = () => simpleBlueprint('Tags its pathway', [{ id: 'mark', type: 'tag', with: { target: 'pathway', add: ['seen'] } }]);

const engineRow = (env: TestEnv, runId: string) =>
  env.db.selectFrom('runs').select(['automation_status', 'failures', 'available_at', 'lease_owner']).where('id', '=', runId).executeTakeFirstOrThrow();

/** The run is due now (as if its retry time had come). */
const dueNow = (env: TestEnv, runId: string) =>
  env.db.updateTable('runs').set({ available_at: new Date(Date.now() - 1_000).toISOString() }).where('id', '=', runId).execute();

async function failingGauge(env: TestEnv): Promise<number | undefined> {
  // One store read serves the scrapes of a second: wait out the previous one.
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  return sample((await env.app.inject({ method: 'GET', url: '/metrics' })).body, 'carepath_runs_failing');
}

it('backs off 5 s, doubling with each failure in a row, never more than 5 minutes; a store that did not answer or had no room is waited for without counting', () => {
  const at = '2026-01-01T00:00:00.000Z';
  const bug = new Error('injected');
  const after = (before: number, error: unknown = bug) => {
    const next = afterFailure(at, before, error);
    return [next.failures, (Date.parse(next.retryAt) - Date.parse(at)) / 1000];
  };
  expect([0, 1, 2, 3, 4, 5, 6, 7, 49].map((before) => after(before))).toEqual([
    [1, 5], [2, 10], [3, 20], [4, 40], [5, 80], [6, 160], [7, 300], [8, 300], [50, 300],
  ]);
  const withCode = (code: string) => Object.assign(new Error('store'), { code });
  expect(after(3, withCode('SQLITE_BUSY'))).toEqual([3, 5]);
  expect(after(3, withCode('57P01'))).toEqual([3, 5]);
  expect(after(3, withCode('SQLITE_FULL'))).toEqual([3, 30]);
  expect(after(3, withCode('53100'))).toEqual([3, 30]);
  expect(after(3, withCode('SQLITE_CONSTRAINT_TRIGGER'))).toEqual([4, 40]);
});

describeEachStore('a run whose execution keeps failing', (env) => {
  it('is retried later after each failure in a row, counted on the run and in /metrics, and starts afresh once it executes', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, tagging());
    const runId = await fire(ws, triggerId, { n: 1 });
    expect(await failingGauge(env)).toBe(0);
    const broken = await breakStepWrites(env);
    const worker = testWorker(env);
    try {
      for (const [failures, seconds] of [[1, 5], [2, 10], [3, 20]]) {
        const before = Date.now();
        expect(await worker.runOnce()).toBe(1);
        const row = await engineRow(env, runId);
        expect(row).toMatchObject({ automation_status: 'scheduled', failures, lease_owner: null });
        // Due again only after the back-off: nothing to claim now.
        const wait = Date.parse(row.available_at) - before;
        expect(wait).toBeGreaterThanOrEqual(seconds * 1000 - 50);
        expect(wait).toBeLessThanOrEqual(seconds * 1000 + 2_000);
        expect(await worker.runOnce()).toBe(0);
        await dueNow(env, runId);
      }
      expect(await failingGauge(env)).toBe(1);
    } finally {
      await broken.heal();
    }

    // The store takes its rows again: the run goes on from where it was and the count is cleared.
    expect(await worker.drain()).toBeGreaterThanOrEqual(1);
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    expect((await engineRow(env, runId)).failures).toBe(0);
    expect(await failingGauge(env)).toBe(0);
  });

  // SQLite cannot be made to answer busy or full on one statement of the engine's own
  // connection; the unit test above covers the rule, this its wiring on PostgreSQL.
  it.runIf(env.kind === 'postgres')('waits for a store with no room without counting it against the run', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, tagging());
    const runId = await fire(ws, triggerId, { n: 3 });
    await sql`create function refuse_steps() returns trigger language plpgsql as $$ begin raise exception 'could not extend file: No space left on device' using errcode = '53100'; end $$`.execute(env.db);
    await sql`create trigger refuse_steps before insert on run_steps for each row execute function refuse_steps()`.execute(env.db);
    const worker = testWorker(env);
    try {
      for (let i = 0; i < 2; i++) {
        const before = Date.now();
        expect(await worker.runOnce()).toBe(1);
        const row = await engineRow(env, runId);
        expect(row).toMatchObject({ automation_status: 'scheduled', failures: 0, lease_owner: null });
        expect(Date.parse(row.available_at) - before).toBeGreaterThanOrEqual(30_000 - 50);
        await dueNow(env, runId);
      }
    } finally {
      await sql`drop trigger refuse_steps on run_steps`.execute(env.db);
      await sql`drop function refuse_steps()`.execute(env.db);
    }
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
  });

  it('fails alone: the runs committed in the same batch as a failing one go on', async () => {
    // The batch's one failure failed every run in it, and (let go at the same moment) they met
    // in one batch again at every retry, so healthy runs never finished.
    const ws = await env.workspace();
    const poisoned = await webTriggerFor(ws, simpleBlueprint('Poisoned', [{ id: 'poison', type: 'tag', with: { target: 'pathway', add: ['x'] } }]));
    const healthy = await webTriggerFor(ws, tagging());
    const poisonRun = await fire(ws, poisoned.triggerId, { n: 1 });
    const healthyRuns = [];
    for (let i = 0; i < 5; i++) healthyRuns.push(await fire(ws, healthy.triggerId, { n: i }));
    if (env.kind === 'sqlite') {
      await sql`create trigger refuse_poison before insert on run_steps when new.automation_id = 'poison' begin select raise(abort, 'injected'); end`.execute(env.db);
    } else {
      await sql`create function refuse_poison() returns trigger language plpgsql as $$ begin if new.automation_id = 'poison' then raise exception 'injected'; end if; return new; end $$`.execute(env.db);
      await sql`create trigger refuse_poison before insert on run_steps for each row execute function refuse_poison()`.execute(env.db);
    }
    try {
      expect(await testWorker(env).runOnce()).toBe(6);
    } finally {
      await sql.raw(env.kind === 'sqlite' ? 'drop trigger refuse_poison' : 'drop trigger refuse_poison on run_steps; drop function refuse_poison()').execute(env.db);
    }
    for (const runId of healthyRuns) {
      expect((await getRun(ws, runId)).automationStatus).toBe('completed');
      expect((await engineRow(env, runId)).failures).toBe(0);
    }
    expect(await engineRow(env, poisonRun)).toMatchObject({ automation_status: 'scheduled', failures: 1 });
    // Out of the way of the gauge's count below.
    expect((await ws.call('POST', `/v1/runs/${poisonRun}/cancel`)).statusCode).toBe(200);
  });

  it('counts in /metrics only runs a worker would try again (a failing run canceled meanwhile is not)', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, tagging());
    const runId = await fire(ws, triggerId, { n: 2 });
    const broken = await breakStepWrites(env);
    try {
      expect(await testWorker(env).runOnce()).toBe(1);
    } finally {
      await broken.heal();
    }
    expect((await engineRow(env, runId)).failures).toBe(1);
    expect(await failingGauge(env)).toBe(1);
    expect((await ws.call('POST', `/v1/runs/${runId}/cancel`)).statusCode).toBe(200);
    expect(await failingGauge(env)).toBe(0);
  });
});
