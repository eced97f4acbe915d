import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeEachStore, type TestWorkspace } from '../helpers/test-env.js';
import { chain, fire, getRun, getSteps, patient, recordTags, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { LedgerServer } from '../helpers/ledger-server.js';
import { ManualClock } from '../../src/lib/clock.js';
import { wakeRunsWaitingFor } from '../../src/engine/event-waits.js';

const ledger = new LedgerServer();
beforeAll(() => ledger.listen());
afterAll(() => ledger.close());

const clock = new ManualClock('2030-03-01T10:00:00.000Z');

const act = (ws: TestWorkspace, runId: string, action: string) => ws.call('POST', `/v1/runs/${runId}/${action}`);

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 400 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

describeEachStore('engine: API actions meet the worker', (env) => {
  const twoSteps = (name: string) =>
    chain(name, [
      { id: 'one', automations: [{ id: 's1', type: 'set', with: { vars: { a: '1' } } }] },
      { id: 'two', automations: [{ id: 's2', type: 'set', with: { vars: { b: '2' } } }] },
    ]);

  it('a queued run is not executed until it is started', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, twoSteps('Queued'));
    const runId = await fire(ws, triggerId, {}, false);
    const worker = testWorker(env);
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('queued');
    expect((await act(ws, runId, 'start')).json().automationStatus).toBe('scheduled');
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    expect(await recordTags(env, runId)).toEqual(['completed']);
  });

  it('pause before the worker claims: nothing runs; resume: the worker picks the running run up', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, twoSteps('Paused early'));
    const runId = await fire(ws, triggerId);
    expect((await act(ws, runId, 'pause')).json().automationStatus).toBe('paused');
    const worker = testWorker(env);
    expect(await worker.drain()).toBe(0);
    expect(await getSteps(ws, runId)).toEqual([]);
    expect((await act(ws, runId, 'resume')).json().automationStatus).toBe('running');
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    expect((await getSteps(ws, runId)).map((s) => s.automationId)).toEqual(['s1', 's2']);
  });

  it('pause during a step: the step finishes and is recorded, the next does not run; resume goes on from there', async () => {
    const ws = await env.workspace();
    ledger.on('/slow-pause', { status: 200, delayMs: 300 });
    const { triggerId } = await webTriggerFor(ws, chain('Paused mid-step', [
      { id: 'call', automations: [{ id: 'post', type: 'http', with: { method: 'POST', url: ledger.url('/slow-pause'), body: {} } }] },
      { id: 'after', automations: [{ id: 'next', type: 'set', with: { vars: { x: '1' } } }] },
    ]));
    const runId = await fire(ws, triggerId);
    const worker = testWorker(env);
    const before = ledger.requests.length;
    const running = worker.runOnce();
    await until(() => ledger.requests.length > before, 'the http call');
    expect((await act(ws, runId, 'pause')).json().automationStatus).toBe('paused');
    await running;
    expect((await getRun(ws, runId)).automationStatus).toBe('paused');
    expect((await getSteps(ws, runId)).map((s) => [s.automationId, s.outcome])).toEqual([['post', 'ok']]);
    const lease = await env.db.selectFrom('runs').select('lease_owner').where('id', '=', runId).executeTakeFirstOrThrow();
    expect(lease.lease_owner).toBeNull();
    expect(await worker.drain()).toBe(0);
    await act(ws, runId, 'resume');
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    expect((await getSteps(ws, runId)).map((s) => [s.automationId, s.outcome])).toEqual([['post', 'ok'], ['next', 'ok']]);
    expect(ledger.requests.filter((r) => r.headers['idempotency-key'] === `${runId}:call:post`)).toHaveLength(1);
  });

  it('pause suspends a timer: it does not fire while paused; after resume a wait with time left goes on waiting', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Paused wait', [{ id: 'w', automations: [{ id: 'nap', type: 'wait', with: { duration: 'PT1H' } }] }]));
    const late = await fire(ws, triggerId);
    const early = await fire(ws, triggerId);
    const worker = testWorker(env);
    await worker.drain();
    await act(ws, late, 'pause');
    await act(ws, early, 'pause');
    clock.advance(30 * 60_000);
    await act(ws, early, 'resume');
    await worker.drain();
    expect((await getRun(ws, early)).automationStatus).toBe('running');
    clock.advance(31 * 60_000);
    await worker.drain();
    // Deadlines are absolute: the resumed wait ended at its deadline; the paused one did not fire.
    expect((await getRun(ws, early)).automationStatus).toBe('completed');
    expect((await getRun(ws, late)).automationStatus).toBe('paused');
    expect((await getSteps(ws, late))[0].outcome).toBeNull();
    await act(ws, late, 'resume');
    await worker.drain();
    expect((await getRun(ws, late)).automationStatus).toBe('completed');
  });

  it('an event for a paused run is kept and seen on resume', async () => {
    const ws = await env.workspace();
    const subjectId = await patient(env, ws, 'p-paused-ev');
    const { triggerId } = await webTriggerFor(ws, chain('Paused event', [
      { id: 'w', automations: [{ id: 'visit', type: 'wait_for_event', with: { event: 'Encounter.finished' } }] },
    ]));
    const runId = await fire(ws, triggerId, { subject: { reference: 'Patient/p-paused-ev' } });
    const worker = testWorker(env);
    await worker.drain();
    await act(ws, runId, 'pause');
    const at = clock.now().toISOString();
    expect(await wakeRunsWaitingFor(env.db, { workspaceId: ws.workspaceId, subjectRecordId: subjectId, event: 'Encounter.finished', eventPayload: { n: 1 }, at })).toBe(1);
    expect(await worker.drain()).toBe(0);
    await act(ws, runId, 'resume');
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    expect((await getSteps(ws, runId))[0]).toMatchObject({ outcome: 'event', output: { payload: { n: 1 } } });
  });

  it("a wait_for_event's timeout is a deadline: an event raised after it while the run was paused ends the wait as timeout; one raised before it, as event", async () => {
    const ws = await env.workspace();
    const subjectId = await patient(env, ws, 'p-late-ev');
    const { triggerId } = await webTriggerFor(ws, chain('Late event', [
      { id: 'w', automations: [{ id: 'visit', type: 'wait_for_event', with: { event: 'Encounter.finished', timeout: 'PT10M' } }] },
    ]));
    const late = await fire(ws, triggerId, { subject: { reference: 'Patient/p-late-ev' } });
    const early = await fire(ws, triggerId, { subject: { reference: 'Patient/p-late-ev' } });
    const worker = testWorker(env);
    await worker.drain();
    await act(ws, late, 'pause');
    await act(ws, early, 'pause');
    // The deadline is 10:10 after the wait began; one event comes at 5 minutes, one at 15.
    clock.advance(5 * 60_000);
    const raise = () => wakeRunsWaitingFor(env.db, { workspaceId: ws.workspaceId, subjectRecordId: subjectId, event: 'Encounter.finished', eventPayload: {}, at: clock.now().toISOString() });
    expect(await raise()).toBe(2);
    // The late run's wait forgets that event, so that only the one at 15 minutes reaches it.
    await env.db.updateTable('run_event_waits').set({ received_at: null, received_event: null }).where('run_id', '=', late).execute();
    clock.advance(10 * 60_000);
    expect(await raise()).toBe(1);
    await act(ws, late, 'resume');
    await act(ws, early, 'resume');
    await worker.drain();
    expect((await getSteps(ws, late)).map((s) => [s.automationId, s.outcome, s.output])).toEqual([['visit', 'timeout', null]]);
    expect((await getSteps(ws, early)).map((s) => [s.automationId, s.outcome])).toEqual([['visit', 'event']]);
    expect((await getRun(ws, late)).automationStatus).toBe('completed');
    expect(await env.db.selectFrom('run_event_waits').select('run_id').where('run_id', 'in', [late, early]).execute()).toEqual([]);
  });

  it('an event for a run a worker holds keeps the lease and is seen before the run sleeps', async () => {
    const ws = await env.workspace();
    const subjectId = await patient(env, ws, 'p-held-ev');
    ledger.on('/slow-held', { status: 200, delayMs: 300 });
    const { triggerId } = await webTriggerFor(ws, {
      name: 'Held event',
      nodes: [
        { id: 'start', kind: 'start' },
        { id: 'w', kind: 'action', automations: [{ id: 'visit', type: 'wait_for_event', with: { event: 'Encounter.finished' } }] },
        { id: 'call', kind: 'action', automations: [{ id: 'post', type: 'http', with: { method: 'POST', url: ledger.url('/slow-held'), body: {} } }] },
        { id: 'done', kind: 'end' },
      ],
      links: [{ from: 'start', to: 'w' }, { from: 'start', to: 'call' }, { from: 'w', to: 'done' }, { from: 'call', to: 'done' }],
    });
    const runId = await fire(ws, triggerId, { subject: { reference: 'Patient/p-held-ev' } });
    const worker = testWorker(env);
    const before = ledger.requests.length;
    const running = worker.runOnce();
    await until(() => ledger.requests.length > before, 'the http call');
    const held = await env.db.selectFrom('runs').select(['lease_owner', 'available_at', 'wake_seq']).where('id', '=', runId).executeTakeFirstOrThrow();
    const at = clock.now().toISOString();
    expect(await wakeRunsWaitingFor(env.db, { workspaceId: ws.workspaceId, subjectRecordId: subjectId, event: 'Encounter.finished', eventPayload: {}, at })).toBe(1);
    const after = await env.db.selectFrom('runs').select(['lease_owner', 'available_at', 'wake_seq']).where('id', '=', runId).executeTakeFirstOrThrow();
    expect(after).toEqual({ ...held, wake_seq: held.wake_seq + 1 });
    await running;
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    expect((await getSteps(ws, runId)).map((s) => [s.automationId, s.outcome])).toEqual([['visit', 'event'], ['post', 'ok']]);
  });

  it('cancel interrupts a wait: its step closes as canceled and nothing wakes the run again', async () => {
    const ws = await env.workspace();
    const subjectId = await patient(env, ws, 'p-cancel');
    const { triggerId } = await webTriggerFor(ws, chain('Canceled wait', [
      { id: 'w', automations: [{ id: 'visit', type: 'wait_for_event', with: { event: 'Encounter.finished', timeout: 'PT1M' } }] },
    ]));
    const runId = await fire(ws, triggerId, { subject: { reference: 'Patient/p-cancel' } });
    const worker = testWorker(env);
    await worker.drain();
    expect((await act(ws, runId, 'cancel')).json().automationStatus).toBe('canceled');
    const at = clock.now().toISOString();
    expect(await wakeRunsWaitingFor(env.db, { workspaceId: ws.workspaceId, subjectRecordId: subjectId, event: 'Encounter.finished', eventPayload: {}, at })).toBe(0);
    clock.advance(120_000);
    expect(await worker.drain()).toBe(0);
    expect((await getSteps(ws, runId)).map((s) => [s.automationId, s.outcome])).toEqual([['visit', 'canceled']]);
    expect(await recordTags(env, runId)).toEqual(['canceled']);
  });

  it('cancel during a call: the call\'s outcome is recorded, nothing runs after it', async () => {
    const ws = await env.workspace();
    ledger.on('/slow-cancel', { status: 200, delayMs: 300 });
    const { triggerId } = await webTriggerFor(ws, chain('Canceled mid-step', [
      { id: 'call', automations: [{ id: 'post', type: 'http', with: { method: 'POST', url: ledger.url('/slow-cancel'), body: {} } }] },
      { id: 'after', automations: [{ id: 'next', type: 'set', with: { vars: { x: '1' } } }] },
    ]));
    const runId = await fire(ws, triggerId);
    const worker = testWorker(env);
    const before = ledger.requests.length;
    const running = worker.runOnce();
    await until(() => ledger.requests.length > before, 'the http call');
    await act(ws, runId, 'cancel');
    await running;
    expect((await getRun(ws, runId)).automationStatus).toBe('canceled');
    expect((await getSteps(ws, runId)).map((s) => [s.automationId, s.outcome])).toEqual([['post', 'ok']]);
    expect(await worker.drain()).toBe(0);
  });

  it('cancel and pause of queued, scheduled and paused runs (repeats change nothing); terminal runs refuse them; resume needs a paused run', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, twoSteps('Actions'));
    const queued = await fire(ws, triggerId, {}, false);
    expect((await act(ws, queued, 'cancel')).json().automationStatus).toBe('canceled');
    const paused = await fire(ws, triggerId);
    await act(ws, paused, 'pause');
    expect((await act(ws, paused, 'cancel')).json().automationStatus).toBe('canceled');
    const queuedPaused = await fire(ws, triggerId, {}, false);
    expect((await act(ws, queuedPaused, 'pause')).json().automationStatus).toBe('paused');
    const twice = await act(ws, queuedPaused, 'pause');
    expect([twice.statusCode, twice.json().automationStatus]).toEqual([200, 'paused']);
    const scheduled = await fire(ws, triggerId);
    expect((await act(ws, scheduled, 'cancel')).json().automationStatus).toBe('canceled');
    const again = await act(ws, scheduled, 'cancel');
    expect([again.statusCode, again.json().automationStatus]).toEqual([200, 'canceled']);
    expect((await act(ws, scheduled, 'resume')).json().code).toBe('run_not_paused');
    const done = await fire(ws, triggerId);
    expect((await act(ws, done, 'resume')).json().code).toBe('run_not_paused');
    await testWorker(env).drain();
    expect((await getRun(ws, done)).automationStatus).toBe('completed');
    expect((await act(ws, done, 'pause')).json().code).toBe('run_terminal');
    expect((await act(ws, done, 'cancel')).json().code).toBe('run_terminal');
    expect((await act(ws, done, 'start')).json().code).toBe('run_not_queued');
    for (const runId of [queued, paused, queuedPaused, scheduled]) expect(await getSteps(ws, runId)).toEqual([]);
    expect((await getRun(ws, queuedPaused)).automationStatus).toBe('paused');
  });
}, { clock, env: { CAREPATH_HTTP_ALLOW: '127.0.0.1' } });
