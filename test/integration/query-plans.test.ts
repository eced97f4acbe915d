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
