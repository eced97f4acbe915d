/**
 * The list and count statements that a big workspace made slow read an index range (a scale
 * review, 2026-11-27: a million runs, two million audit events). On SQLite the plans are checked;
 * PostgreSQL's depend on its statistics, so there the indexes are checked to exist.
 */
import { expect, it } from 'vitest';
import { CompiledQuery } from 'kysely';
import { describeEachStore } from '../helpers/test-env.js';
import { sqliteConnectionOf } from '../../src/storage/connect.js';
import { runListSelect } from '../../src/modules/runs/run.repository.js';

const PLANS: { what: string; sql: string; index: RegExp | RegExp[] }[] = [
  {
    what: "a trigger's runs, newest first",
    sql: 'select id from runs where workspace_id = ? and trigger_id = ? order by id desc limit 26',
    index: /^SEARCH runs USING (COVERING )?INDEX runs_by_trigger \(workspace_id=\? AND trigger_id=\?\)$/,
  },
  {
    what: "a trigger's runs of one status",
    sql: 'select id from runs where workspace_id = ? and trigger_id = ? and automation_status = ? order by id desc limit 26',
    index: /^SEARCH runs USING (COVERING )?INDEX runs_by_trigger_status \(workspace_id=\? AND trigger_id=\? AND automation_status=\?\)$/,
  },
  {
    what: "a trigger's counts by status, from the index alone",
    sql: 'select automation_status, count(*) from runs where workspace_id = ? and trigger_id = ? group by automation_status',
    index: /^SEARCH runs USING COVERING INDEX runs_by_trigger_status \(workspace_id=\? AND trigger_id=\?\)$/,
  },
  {
    what: 'audit events since a time',
    sql: 'select * from audit_events where workspace_id = ? and at >= ? and id >= ? order by id desc limit 26',
    index: /^SEARCH audit_events USING INDEX audit_list \(workspace_id=\? AND id>\?\)$/,
  },
  {
    what: "a key's audit events, newest first",
    sql: 'select * from audit_events where workspace_id = ? and key_id = ? and id < ? order by id desc limit 26',
    index: /^SEARCH audit_events USING INDEX audit_by_key \(workspace_id=\? AND key_id=\? AND id<\?\)$/,
  },
  {
    what: "a record's audit events, newest first: its index rows in order, each event by its id",
    sql:
      'select e.* from audit_event_records as r cross join audit_events as e where e.id = r.event_id and r.workspace_id = ? and r.record_id = ? ' +
      'and e.workspace_id = ? and e.action = ? and r.event_id < ? order by r.event_id desc limit 26',
    index: [
      /^SEARCH r USING PRIMARY KEY \(workspace_id=\? AND record_id=\? AND event_id<\?\)$/,
      /^SEARCH e USING (INDEX \w+|PRIMARY KEY) \((workspace_id=\? AND (action=\? AND )?)?id=\?\)$/,
    ],
  },
];

describeEachStore('query plans of big lists', (env) => {
  it('read index ranges, the workspace first', async () => {
    if (env.kind === 'postgres') {
      const { rows } = await env.db.executeQuery<{ indexdef: string }>(
        CompiledQuery.raw(`select indexdef from pg_indexes where schemaname = current_schema() and tablename = 'runs'`),
      );
      const definitions = rows.map((row) => row.indexdef).join('\n');
      expect(definitions).toMatch(/runs_by_trigger .*\(workspace_id, trigger_id, id\)/);
      expect(definitions).toMatch(/runs_by_trigger_status .*\(workspace_id, trigger_id, automation_status, id\)/);
      expect(definitions).not.toMatch(/ runs_trigger /);
      expect(definitions).not.toMatch(/ runs_trigger_status /);
      const audit = await env.db.executeQuery<{ indexdef: string }>(
        CompiledQuery.raw(`select indexdef from pg_indexes where schemaname = current_schema() and tablename in ('audit_events', 'audit_event_records')`),
      );
      const auditDefinitions = audit.rows.map((row) => row.indexdef).join('\n');
      expect(auditDefinitions).toMatch(/audit_by_key .*\(workspace_id, key_id, id\)/);
      expect(auditDefinitions).toMatch(/audit_event_records_pk .*\(workspace_id, record_id, event_id\)/);
      return;
    }
    const connection = sqliteConnectionOf(env.db)!;
    for (const { what, sql, index } of PLANS) {
      const parameters = Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => 'x');
      const plan = (connection.prepare(`explain query plan ${sql}`).all(...parameters) as { detail: string }[]).map((row) => row.detail);
      expect(plan, what).toEqual((Array.isArray(index) ? index : [index]).map((line) => expect.stringMatching(line)));
    }
  });
});

describeEachStore('query plans of the runs list by Idempotency-Key', (env) => {
  // A key names a handful of runs: its index drives the read, whatever else is filtered on (a
  // cost review: SQLite walked the workspace's runs, or a trigger's in one status, to skip a sort).
  const filters = [
    {},
    { status: 'running' },
    { triggerId: '01900000-0000-7000-8000-000000000001' },
    { triggerId: '01900000-0000-7000-8000-000000000001', status: 'running' },
  ];
  it('reads the key index range, in id order', async () => {
    if (env.kind === 'postgres') {
      const { rows } = await env.db.executeQuery<{ indexdef: string }>(
        CompiledQuery.raw(`select indexdef from pg_indexes where schemaname = current_schema() and tablename = 'runs'`),
      );
      expect(rows.map((row) => row.indexdef).join('\n')).toMatch(/runs_by_idempotency_key .*\(workspace_id, idempotency_key, id\)/);
      return;
    }
    const connection = sqliteConnectionOf(env.db)!;
    for (const extra of filters) {
      for (const cursor of [false, true]) {
        let select = runListSelect(env.db, 'w', { idempotencyKey: 'k', ...extra });
        if (cursor) select = select.where('id', '<', 'x');
        const { sql, parameters } = select.orderBy('id', 'desc').limit(26).compile();
        const plan = (connection.prepare(`explain query plan ${sql}`).all(...parameters) as { detail: string }[]).map((row) => row.detail);
        const range = cursor ? 'workspace_id=\\? AND idempotency_key=\\? AND id<\\?' : 'workspace_id=\\? AND idempotency_key=\\?';
        expect(plan, JSON.stringify({ extra, cursor })).toEqual([expect.stringMatching(new RegExp(`^SEARCH runs USING INDEX runs_by_idempotency_key \\(${range}\\)$`))]);
      }
    }
  });
});

describeEachStore('query plans of a search page on SQLite', (env) => {
  // The page's records are read by position (rowid), never by walking the workspace's records
  // to check each one's position (a cost review: without statistics, SQLite read
  // `workspace_id = ? and seq in (…)` through a workspace index, 45 ms a search at 200,000 records).
  it('reads the hits, and few matches in order, by rowid', async () => {
    const connection = sqliteConnectionOf(env.db);
    if (!connection) return;
    const ws = await env.workspace();
    const at = new Date().toISOString();
    const records = Array.from({ length: 300 }, (_, i) => ({
      id: `0190e000-0000-7000-8000-${String(i).padStart(12, '0')}`, workspace_id: ws.workspaceId, resource_type: 'Patient' as const,
      ext_id: `p-${i}`, name: `Patient ${i}`, created_at: at, updated_at: at,
    }));
    await env.db.insertInto('records').values(records).execute();
    await env.db.insertInto('record_tags').values(records.filter((_, i) => i % 100 === 0).map((r) => ({ record_id: r.id, workspace_id: ws.workspaceId, tag: 'rare' }))).execute();
    const prepared: string[] = [];
    const prepare = connection.prepare.bind(connection);
    connection.prepare = ((text: string) => (prepared.push(text), prepare(text))) as typeof connection.prepare;
    try {
      for (const body of [{ resourceType: 'Patient', limit: 10 }, { resourceType: 'Patient', filters: [{ op: 'with', tag: 'rare' }] }]) {
        const res = await ws.call('POST', '/v1/search', { body });
        expect(res.statusCode).toBe(200);
      }
    } finally {
      connection.prepare = prepare;
    }
    const byPosition = prepared.filter((text) => /from "records"/.test(text) && /json_each/.test(text));
    expect(byPosition.length).toBeGreaterThanOrEqual(2);
    for (const text of byPosition) {
      const parameters = Array.from({ length: (text.match(/\?/g) ?? []).length }, () => '[1]');
      const plan = (connection.prepare(`explain query plan ${text}`).all(...parameters) as { detail: string }[]).map((row) => row.detail);
      expect(plan.filter((line) => /^(SEARCH|SCAN) records /.test(line)), text).toEqual(['SEARCH records USING INTEGER PRIMARY KEY (rowid=?)']);
    }
  });
});
