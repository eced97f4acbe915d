/**
 * Statements written once as SQL text with a name run prepared (named, on PostgreSQL) on
 * whichever connection runs them: the pool's, or a transaction's, where Kysely hands the text
 * over bare. A search's page runs inside a REPEATABLE READ transaction and was planned afresh on
 * every call, with its 128 KiB match bitmap, until the name followed the text there too.
 */
import { expect, it } from 'vitest';
import { sql } from 'kysely';
import { describeEachStore } from '../helpers/test-env.js';
import { runHot, type HotStatement } from '../../src/storage/hot-statement.js';
import { runPostgres } from '../../src/storage/postgres-statement.js';
import { insertRecords } from '../../src/modules/records/record.repository.js';

const WORKSPACE_NAME: HotStatement = {
  name: 'carepath_test_workspace_name_v1',
  sqlite: 'select name from workspaces where id = ?',
  postgres: 'select name from workspaces where id = $1',
};

describeEachStore('statements prepared inside transactions', (env) => {
  it('a statement answers the same inside a transaction as on the pool, run again and again', async () => {
    const ws = await env.workspace();
    const outside = await runHot<{ name: string }>(env.db, WORKSPACE_NAME, () => [ws.workspaceId]);
    expect(outside).toHaveLength(1);
    for (let i = 0; i < 8; i++) {
      const inside = await env.db.transaction().execute((tx) => runHot<{ name: string }>(tx, WORKSPACE_NAME, () => [ws.workspaceId]));
      expect(inside).toEqual(outside);
    }
  });

  it('a search answers the same page call after call (the page statement prepared on its connection)', async () => {
    const ws = await env.workspace();
    await insertRecords(
      env.db,
      ws.workspaceId,
      Array.from({ length: 30 }, (_, i) => ({ resourceType: 'Patient' as const, extId: `p-${i}`, name: `Patient ${String(i).padStart(2, '0')}`, tags: i % 3 === 0 ? ['risk'] : [] })),
      new Date().toISOString(),
    );
    const pages: string[][] = [];
    for (let i = 0; i < 8; i++) {
      const res = await ws.call('POST', '/v1/search', { body: { resourceType: 'Patient', filters: [{ op: 'with', tag: 'risk' }], limit: 5 } });
      expect(res.statusCode).toBe(200);
      expect(res.json().total).toBe(10);
      pages.push(res.json().results.map((hit: { extId: string }) => hit.extId));
    }
    expect(pages[0]).toEqual(['p-0', 'p-3', 'p-6', 'p-9', 'p-12']);
    for (const page of pages) expect(page).toEqual(pages[0]);
  });

  it('PostgreSQL: the transaction’s connection prepares the statement under its name', async () => {
    if (env.kind !== 'postgres') return;
    const ws = await env.workspace();
    const statement = { name: 'carepath_test_named_in_tx_v1', text: 'select id from workspaces where id = $1' };
    const prepared = await env.db.transaction().execute(async (tx) => {
      const rows = await runPostgres<{ id: string }>(tx, statement, [ws.workspaceId]);
      expect(rows).toEqual([{ id: ws.workspaceId }]);
      const names = await sql<{ name: string }>`select name from pg_prepared_statements where name = ${statement.name}`.execute(tx);
      return names.rows.map((row) => row.name);
    });
    expect(prepared).toEqual([statement.name]);
  });

  it('PostgreSQL: a named statement that fails inside a transaction leaves the connection able to run it', async () => {
    if (env.kind !== 'postgres') return;
    const ws = await env.workspace();
    const statement = { name: 'carepath_test_named_fails_v1', text: 'select id, 1 / $2::int as n from workspaces where id = $1' };
    await expect(env.db.transaction().execute((tx) => runPostgres(tx, statement, [ws.workspaceId, 0]))).rejects.toThrow(/division by zero/);
    // Every pooled connection (10) runs it once more, in a transaction and outside.
    const inside = await Promise.all(
      Array.from({ length: 12 }, () => env.db.transaction().execute((tx) => runPostgres<{ n: number }>(tx, statement, [ws.workspaceId, 1]))),
    );
    for (const rows of inside) expect(rows).toEqual([{ id: ws.workspaceId, n: 1 }]);
    expect(await runPostgres(env.db, statement, [ws.workspaceId, 1])).toEqual([{ id: ws.workspaceId, n: 1 }]);
  });
});
