/**
 * A search asked again (the next page of a cohort, a dashboard polling it) is, on PostgreSQL, one
 * statement that checks the store still holds what its matches were computed from
 * (modules/search `findUnchangedPage`). Here every change that can come between two asks comes:
 * a change still in the log, its fold (a new version of a chunk), a chunk dropped by a fold, a
 * record deleted, a record added. Each page must be the page plain SQL gives, and each search
 * must write exactly one audit row listing the ids it returned, never one for a check that failed.
 */
import { expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import { describeEachStore, type TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { changeTags, insertRecords } from '../../src/modules/records/record.repository.js';
import { foldTagChanges } from '../../src/modules/search/tag-bitmap.repository.js';
import { searchRecords } from '../../src/modules/search/search.service.js';
import { systemContext } from '../../src/auth/context.js';

const FILTERS = [
  { op: 'with', tag: 'odd' },
  { op: 'without', tag: 'gone' },
] as const;

/** Records of the workspace that carry `odd` and not `gone`, in name order: what a page must show. */
async function expectedIds(env: TestEnv, ws: TestWorkspace, offset: number, limit: number): Promise<string[]> {
  const rows = await env.db
    .selectFrom('records')
    .select('records.id')
    .where('records.workspace_id', '=', ws.workspaceId)
    .where('records.resource_type', '=', 'Patient')
    .where((eb) =>
      eb.and([
        eb.exists(eb.selectFrom('record_tags').select('tag').whereRef('record_tags.record_id', '=', 'records.id').where('tag', '=', 'odd')),
        eb.not(eb.exists(eb.selectFrom('record_tags').select('tag').whereRef('record_tags.record_id', '=', 'records.id').where('tag', '=', 'gone'))),
      ]),
    )
    .orderBy('records.name')
    .orderBy('records.id')
    .offset(offset)
    .limit(limit)
    .execute();
  return rows.map((row) => row.id);
}

async function searchAuditRows(env: TestEnv, ws: TestWorkspace): Promise<string[]> {
  const rows = await env.db
    .selectFrom('audit_events')
    .select('details')
    .where('workspace_id', '=', ws.workspaceId)
    .where('action', '=', 'search.execute')
    .orderBy('at')
    .orderBy('id')
    .execute();
  return rows.map((row) => row.details);
}

async function foldAll(env: TestEnv): Promise<void> {
  while ((await foldTagChanges(env.db)) > 0);
}

describeEachStore('search asked again', (env) => {
  it('answers as plain SQL after every kind of change, with one audit row per search listing its ids', async () => {
    const ws = await env.workspace();
    const at = new Date().toISOString();
    const ids = await insertRecords(
      env.db,
      ws.workspaceId,
      Array.from({ length: 40 }, (_, i) => ({
        resourceType: 'Patient' as const,
        extId: `u-${i}`,
        name: `U ${String(i).padStart(2, '0')}`,
        // One record carries `gone`: its chunk of `gone` is dropped once the tag leaves it.
        tags: [...(i % 2 ? ['odd'] : []), ...(i === 3 ? ['gone'] : [])],
      })),
      at,
    );
    await foldAll(env);
    let searches = 0;
    const expectPage = async (offset: number, limit: number, label: string) => {
      const res = await ws.call('POST', '/v1/search', { body: { resourceType: 'Patient', filters: FILTERS, limit, offset } });
      searches++;
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json() as { total: number; results: { id: string }[] };
      const expected = await expectedIds(env, ws, offset, limit);
      expect(body.results.map((hit) => hit.id), label).toEqual(expected);
      expect(body.total, label).toBe((await expectedIds(env, ws, 0, 1_000)).length);
      const audits = await searchAuditRows(env, ws);
      expect(audits, label).toHaveLength(searches);
      expect(JSON.parse(audits[audits.length - 1]).ids, label).toEqual(expected);
    };

    await expectPage(0, 5, 'first ask');
    await expectPage(0, 5, 'asked again');
    await expectPage(5, 5, 'the next page');
    await changeTags(env.db, ws.workspaceId, ids[0], ['odd'], [], at);
    await expectPage(0, 5, 'a change in the log');
    await expectPage(0, 5, 'the same change, still in the log');
    await foldAll(env);
    await expectPage(0, 5, 'the change folded: a new version of the chunk');
    await expectPage(0, 5, 'asked again after the fold');
    await changeTags(env.db, ws.workspaceId, ids[3], [], ['gone'], at);
    await foldAll(env);
    await expectPage(0, 5, 'the chunk of gone dropped by the fold');
    await expectPage(0, 5, 'asked again without a chunk of gone');
    await env.db.deleteFrom('record_tags').where('record_id', '=', ids[1]).execute();
    await env.db.deleteFrom('records').where('id', '=', ids[1]).execute();
    await foldAll(env);
    await expectPage(0, 5, 'a record deleted');
    await insertRecords(env.db, ws.workspaceId, [{ resourceType: 'Patient', extId: 'u-new', name: 'U 00a', tags: ['odd'] }], at);
    await expectPage(0, 5, 'a record added, in the log');
    await foldAll(env);
    await expectPage(0, 5, 'a record added, folded');
    await expectPage(0, 5, 'asked again at the end');
  });

  it('PostgreSQL: a search asked again over unchanged tags is one statement, without a transaction', async () => {
    if (env.kind !== 'postgres') return;
    const ws = await env.workspace();
    const at = new Date().toISOString();
    const ids = await insertRecords(
      env.db,
      ws.workspaceId,
      Array.from({ length: 12 }, (_, i) => ({ resourceType: 'Patient' as const, extId: `t-${i}`, name: `T ${i}`, tags: i % 2 ? ['odd'] : [] })),
      at,
    );
    await foldAll(env);
    const search = () => ws.call('POST', '/v1/search', { body: { resourceType: 'Patient', filters: FILTERS, limit: 3 } });
    const transactions = vi.spyOn(env.db, 'transaction');
    try {
      await search();
      expect(transactions).toHaveBeenCalledTimes(1);
      await search();
      await search();
      expect(transactions).toHaveBeenCalledTimes(1);
      // A change in the log: the check fails, and the search reads in its transaction again.
      await changeTags(env.db, ws.workspaceId, ids[0], ['odd'], [], at);
      const changed = await search();
      expect(changed.json().total).toBe(7);
      expect(transactions).toHaveBeenCalledTimes(2);
    } finally {
      transactions.mockRestore();
    }
  });

  it('PostgreSQL: its check reads through the indexes though its plan was made over an empty log and few chunks', async () => {
    if (env.kind !== 'postgres') return;
    const ws = await env.workspace();
    const at = new Date().toISOString();
    await insertRecords(
      env.db,
      ws.workspaceId,
      Array.from({ length: 200 }, (_, i) => ({ resourceType: 'Patient' as const, extId: `g-${i}`, name: `G ${i}`, tags: i % 2 ? ['odd'] : [] })),
      at,
    );
    await foldAll(env);
    await sql`analyze record_tag_changes`.execute(env.db);
    await sql`analyze tag_bitmaps`.execute(env.db);
    const ctx = { ...systemContext(ws.tenantId, ws.workspaceId, 'plans'), keyName: 'test' };
    const search = async (times: number) => {
      for (let i = 0; i < times; i++) {
        const page = await searchRecords(env.db, ctx, { resourceType: 'Patient', filters: [...FILTERS], limit: 10 }, new Date());
        expect(page.total).toBe(100);
      }
    };
    // Enough asks for every pooled connection that serves one to keep the statement's generic plan.
    await search(30);
    // Another workspace's changes wait to be folded, and its chunks are many; no ANALYZE since.
    await sql`insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)
              select 'another', 'Patient', 'odd', g, 1 from generate_series(1, 50000) g`.execute(env.db);
    await sql`insert into tag_bitmaps (workspace_id, resource_type, tag, chunk, bits, version)
              select 'another', 'Patient', 'odd', g, decode('00', 'hex'), g from generate_series(1, 20000) g`.execute(env.db);
    // Table statistics reach pg_stat_user_tables within a second of a backend's last statement.
    const sequentialScans = async () => {
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      const { rows } = await sql<{ tables: string; scans: string }>`
        select string_agg(relname, ',') as tables, sum(seq_scan) as scans from pg_stat_user_tables
        where schemaname = current_schema() and relname in ('record_tag_changes', 'tag_bitmaps')`.execute(env.db);
      expect(rows[0].tables.split(',').sort()).toEqual(['record_tag_changes', 'tag_bitmaps']);
      return Number(rows[0].scans);
    };
    const before = await sequentialScans();
    await search(30);
    expect(await sequentialScans()).toBe(before);
  });
});
