import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { changeTags, insertRecords } from '../../src/modules/records/record.repository.js';

/**
 * Two transactions changing one record's tags twice each (two workers running `tag` automations
 * for one patient) finish one after the other. On PostgreSQL they deadlocked when each wrote a
 * tag row before locking the record: each then wanted what the other held.
 */
describeEachStore('tags of one record changed by two transactions at once', (env) => {
  it('both commit, whatever the interleaving, and the tags are those of both', async () => {
    const ws = await env.workspace();
    const at = new Date().toISOString();
    const [recordId] = await insertRecords(env.db, ws.workspaceId, [{ resourceType: 'Patient', extId: 'locks-p', name: 'Locks', tags: [] }], at);
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    let firstDone!: () => void;
    const firstTagged = new Promise<void>((resolve) => (firstDone = resolve));

    const one = env.db.transaction().execute(async (tx) => {
      await changeTags(tx, ws.workspaceId, recordId, ['x'], [], at);
      firstDone();
      // The other transaction has begun its first change meanwhile (on SQLite it waits for the lock).
      await sleep(env.kind === 'postgres' ? 300 : 0);
      await changeTags(tx, ws.workspaceId, recordId, ['y'], [], at);
    });
    const two = (async () => {
      await firstTagged;
      return env.db.transaction().execute(async (tx) => {
        await changeTags(tx, ws.workspaceId, recordId, ['y'], [], at);
        await changeTags(tx, ws.workspaceId, recordId, ['x', 'z'], [], at);
      });
    })();
    const outcomes = await Promise.allSettled([one, two]);
    expect(outcomes.map((o) => (o.status === 'rejected' ? String((o.reason as { code?: string }).code ?? o.reason) : 'ok'))).toEqual(['ok', 'ok']);
    const tags = await env.db.selectFrom('record_tags').select('tag').where('record_id', '=', recordId).orderBy('tag').execute();
    expect(tags.map((t) => t.tag)).toEqual(['x', 'y', 'z']);
  });

  it('a record deleted while its tags were being changed keeps no tag rows: the change answers false', async () => {
    const ws = await env.workspace();
    const at = new Date().toISOString();
    const [recordId] = await insertRecords(env.db, ws.workspaceId, [{ resourceType: 'Patient', extId: 'gone-p', name: 'Gone', tags: ['old'] }], at);
    let deleted!: () => void;
    const rowsDeleted = new Promise<void>((resolve) => (deleted = resolve));
    // A delivery's FHIR DELETE: tags, then the record, in one transaction that commits after the
    // tag step has begun (on PostgreSQL the step waits for the record's row; on SQLite for the lock).
    const deletion = env.db.transaction().execute(async (tx) => {
      await tx.deleteFrom('record_tags').where('record_id', '=', recordId).execute();
      await tx.deleteFrom('records').where('id', '=', recordId).execute();
      deleted();
      await new Promise((resolve) => setTimeout(resolve, env.kind === 'postgres' ? 200 : 0));
    });
    await rowsDeleted;
    const changed = env.db.transaction().execute((tx) => changeTags(tx, ws.workspaceId, recordId, ['new'], ['old'], at));
    await deletion;
    expect(await changed).toBe(false);
    expect(await env.db.selectFrom('record_tags').select('tag').where('record_id', '=', recordId).execute()).toEqual([]);
  });
});
