import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { chain, fire, webTriggerFor } from '../helpers/engine-harness.js';
import { claimRuns } from '../../src/engine/sql/claim-runs.js';
import { commitWrites, type StepWrite } from '../../src/engine/step-committer.js';
import { setRunStatus } from '../../src/engine/run-transitions.js';
import { changeTags, insertRecords } from '../../src/modules/records/record.repository.js';
import { addMs } from '../../src/lib/clock.js';

/**
 * Two batches of steps that tag the same patients, in opposite orders, at the same time: each
 * locks every patient record its effects change before the first effect runs, in one order
 * (modules/records/record-locks.ts), so they take turns. In batch order they deadlocked on
 * PostgreSQL (a soak review: hundreds of deadlocks a minute, calls made twice).
 */
describeEachStore('engine: patient records locked in one order by step batches', (env) => {
  it('two batches tagging the same two patients in opposite orders both commit', async () => {
    const ws = await env.workspace();
    const at = new Date().toISOString();
    const [first, second] = await insertRecords(
      env.db,
      ws.workspaceId,
      [
        { resourceType: 'Patient', extId: 'lock-p1', name: 'One', tags: [] },
        { resourceType: 'Patient', extId: 'lock-p2', name: 'Two', tags: [] },
      ],
      at,
    );
    const { triggerId } = await webTriggerFor(ws, chain('Lock order', [{ id: 'a', automations: [{ id: 's', type: 'set', with: { vars: { x: '1' } } }] }]));
    for (let i = 0; i < 4; i++) await fire(ws, triggerId);
    const now = addMs(new Date().toISOString(), 1_000);
    const claim = (owner: string) => claimRuns(env.db, { owner, now, leaseUntil: addMs(now, 60_000), limit: 2 });
    const runsA = await claim('worker-a');
    const runsB = await claim('worker-b');
    expect(runsA).toHaveLength(2);
    expect(runsB).toHaveLength(2);
    for (const run of [...runsA, ...runsB]) expect(await setRunStatus(env.db, { runId: run.id, from: 'scheduled', to: 'running', at })).toBe(true);

    // Each batch's first effect holds its record a while: long enough for the other batch's
    // first effect to take the other record, when effects lock in batch order.
    const pause = () => new Promise((resolve) => setTimeout(resolve, 300));
    const tagWrite = (run: { id: string; lease_fence: number }, owner: string, record: { id: string; extId: string }, holds: boolean): StepWrite => ({
      lease: { runId: run.id, owner, fence: run.lease_fence },
      at,
      from: 'running',
      state: '{}',
      requireRunning: true,
      locksRecord: { workspaceId: ws.workspaceId, resourceType: 'Patient', extId: record.extId },
      effect: async (tx, when) => {
        await changeTags(tx, ws.workspaceId, record.id, [`by-${owner}`], [], when);
        if (holds) await pause();
      },
    });
    const p1 = { id: first, extId: 'lock-p1' };
    const p2 = { id: second, extId: 'lock-p2' };
    const batchA = [tagWrite(runsA[0], 'worker-a', p2, true), tagWrite(runsA[1], 'worker-a', p1, false)];
    const batchB = [tagWrite(runsB[0], 'worker-b', p1, true), tagWrite(runsB[1], 'worker-b', p2, false)];
    const lockRecords = env.kind === 'postgres';
    const outcomes = await Promise.allSettled([
      env.db.transaction().execute((tx) => commitWrites(tx, batchA, { lockRecords })),
      env.db.transaction().execute((tx) => commitWrites(tx, batchB, { lockRecords })),
    ]);
    expect(outcomes.map((outcome) => (outcome.status === 'fulfilled' ? [...outcome.value].sort() : (outcome.reason as { code?: string }).code))).toEqual([
      runsA.map((run) => run.id).sort(),
      runsB.map((run) => run.id).sort(),
    ]);
    const tags = await env.db.selectFrom('record_tags').select(['record_id', 'tag']).where('record_id', 'in', [first, second]).orderBy('record_id').orderBy('tag').execute();
    expect(tags.map((row) => [row.record_id === first ? 'p1' : 'p2', row.tag])).toEqual([
      ['p1', 'by-worker-a'],
      ['p1', 'by-worker-b'],
      ['p2', 'by-worker-a'],
      ['p2', 'by-worker-b'],
    ]);
  });
});
