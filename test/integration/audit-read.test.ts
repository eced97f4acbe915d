/**
 * Reading the audit trail is audited: each page `GET /v1/audit-events` answers writes one
 * `audit.read` (after the page is read, before it is answered), and each
 * `carepath admin audit export` one `audit.export` (after its last page is read, before its last
 * line). The events hold the filters asked and a count, and name the record a read asked about.
 */
import { expect, it } from 'vitest';
import { sql } from 'kysely';
import { describeEachStore, type TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { patient as insertPatient } from '../helpers/engine-harness.js';
import { recordAudit, type AuditEvent, type AuditInput } from '../../src/modules/audit/audit.repository.js';
import { systemContext } from '../../src/auth/context.js';
import { SCOPES } from '../../src/auth/scopes.js';
import { auditExport } from '../../src/cli/admin/audit.js';
import { parseAdminArgv } from '../../src/cli/admin/dispatch.js';
import type { Output } from '../../src/cli/admin/command.js';
import type { Container } from '../../src/container.js';

/** An event as the API and the export write it (its time as ISO text). */
type EventJson = AuditEvent;

async function read(ws: TestWorkspace, query: string, options: { key?: string; requestId?: string } = {}) {
  const headers: Record<string, string> = options.requestId === undefined ? {} : { 'x-request-id': options.requestId };
  const res = await ws.call('GET', `/v1/audit-events?${query}`, { key: options.key, headers });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { data: EventJson[]; nextCursor: string | null };
}

/** The workspace's stored events of an action, counted in the store (not through a read, which would add one). */
async function stored(env: TestEnv, ws: TestWorkspace, action: string): Promise<number> {
  const rows = await env.db.selectFrom('audit_events').select('id').where('workspace_id', '=', ws.workspaceId).where('action', '=', action).execute();
  return rows.length;
}

/** Events written straight to the store, as a service would write them, `count` at once. */
async function seedEvents(env: TestEnv, ws: TestWorkspace, inputs: AuditInput[]): Promise<void> {
  await recordAudit(env.db, systemContext(ws.tenantId, ws.workspaceId, 'seed'), new Date().toISOString(), inputs);
}

const queryCreate = (n: number): AuditInput => ({ action: 'query.create', resourceType: 'query', resourceId: `q-${n}`, details: { name: `q-${n}` } });

/** Runs argv as `carepath admin …` would, collecting what it prints on stdout, one event a line. */
async function exportLines(container: Container, argv: string[]): Promise<EventJson[]> {
  const parsed = parseAdminArgv(['audit', 'export', ...argv]);
  if (parsed.kind !== 'run') throw new Error('not a command run');
  let printed = '';
  const out: Output = { write: async (text) => void (printed += text) };
  await parsed.command.execute(container, parsed.args, out, parsed.json);
  return printed.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line));
}

/** Makes the store refuse events of `action`, as a full disk or a lost connection would, for the length of `body`. */
async function refusingAudit(env: TestEnv, action: string, body: () => Promise<void>): Promise<void> {
  const name = `refuse_${action.replace('.', '_')}`;
  const refuse =
    env.kind === 'sqlite'
      ? [sql`create trigger ${sql.raw(name)} before insert on audit_events when new.action = ${sql.lit(action)} begin select raise(abort, 'audit refused'); end`]
      : [
          sql`create function ${sql.raw(name)}() returns trigger language plpgsql as $$
            begin if new.action = ${sql.lit(action)} then raise exception 'audit refused'; end if; return new; end $$`,
          sql`create trigger ${sql.raw(name)} before insert on audit_events for each row execute function ${sql.raw(name)}()`,
        ];
  for (const statement of refuse) await statement.execute(env.db);
  try {
    await body();
  } finally {
    await sql`drop trigger ${sql.raw(name)} ${sql.raw(env.kind === 'postgres' ? 'on audit_events' : '')}`.execute(env.db);
    if (env.kind === 'postgres') await sql`drop function ${sql.raw(name)}()`.execute(env.db);
  }
}

describeEachStore('reading the audit trail is audited', (env) => {
  it('writes one audit.read per page answered, with the filters asked and the count; never on its own page, on the next read', async () => {
    const ws = await env.workspace();
    await seedEvents(env, ws, [queryCreate(0), queryCreate(1), queryCreate(2)]);

    const first = await read(ws, 'action=query.create&limit=2', { requestId: 'page-1' });
    expect(first.data.map((event) => event.resourceId)).toEqual(['q-2', 'q-1']);
    const second = await read(ws, `action=query.create&limit=2&cursor=${encodeURIComponent(first.nextCursor!)}`, { requestId: 'page-2' });
    expect(second.data.map((event) => event.resourceId)).toEqual(['q-0']);
    expect(await stored(env, ws, 'audit.read')).toBe(2);

    // A whole list: its own read is not on it; the reads before are, newest first.
    const whole = await read(ws, 'limit=100', { requestId: 'whole' });
    expect(whole.data.map((event) => event.requestId)).toEqual(['page-2', 'page-1', 'seed', 'seed', 'seed']);
    const reads = await read(ws, 'action=audit.read', { requestId: 'reads' });
    const asKey = { keyId: ws.keyId, keyName: 'test key', workspaceId: ws.workspaceId, resourceType: null, resourceId: null, outcome: 'success' };
    expect(reads.data).toEqual([
      expect.objectContaining({ ...asKey, action: 'audit.read', requestId: 'whole', details: { filters: {}, cursor: false, count: 5 } }),
      expect.objectContaining({ ...asKey, action: 'audit.read', requestId: 'page-2', details: { filters: { action: 'query.create' }, cursor: true, count: 1 } }),
      expect.objectContaining({ ...asKey, action: 'audit.read', requestId: 'page-1', details: { filters: { action: 'query.create' }, cursor: false, count: 2 } }),
    ]);

    // `since` as applied (UTC), `keyId`, and a page with nothing on it: counted all the same.
    const since = await read(ws, `since=${encodeURIComponent('2999-01-01T01:00:00+01:00')}&keyId=${ws.keyId}`, { requestId: 'empty' });
    expect(since.data).toEqual([]);
    expect((await read(ws, 'action=audit.read&limit=1')).data).toEqual([
      expect.objectContaining({ requestId: 'empty', details: { filters: { since: '2999-01-01T00:00:00.000Z', keyId: ws.keyId }, cursor: false, count: 0 } }),
    ]);
    expect(await stored(env, ws, 'audit.read')).toBe(6);
  });

  it("names the record a read asked about: it shows in that record's report and in the reading key's", async () => {
    const ws = await env.workspace();
    const ada = await insertPatient(env, ws, 'mrn-read-ada');
    const bob = await insertPatient(env, ws, 'mrn-read-bob');
    await seedEvents(env, ws, [{ action: 'run.create', resourceType: 'run', resourceId: 'r-1', details: { subjectRecordId: ada } }]);
    const officer = await ws.keyWith(['audit:read']);

    // The officer pulls Ada's report (upper case is the same id).
    const pulled = await read(ws, `recordId=${ada.toUpperCase()}`, { key: officer.key, requestId: 'pull-ada' });
    expect(pulled.data.map((event) => event.action)).toEqual(['run.create']);

    const report = await read(ws, `recordId=${ada}`);
    expect(report.data.map((event) => event.action)).toEqual(['audit.read', 'run.create']);
    expect(report.data[0]).toMatchObject({
      requestId: 'pull-ada',
      keyId: officer.keyId,
      keyName: 'key with audit:read',
      resourceType: 'record',
      resourceId: ada,
      details: { filters: { recordId: ada }, cursor: false, count: 1 },
    });
    const named = await env.db.selectFrom('audit_event_records').select('record_id').where('event_id', '=', report.data[0].id).execute();
    expect(named.map((row) => row.record_id)).toEqual([ada]);
    // The key's report: what the officer did is the one read.
    expect((await read(ws, `keyId=${officer.keyId}`)).data.map((event) => [event.action, event.requestId, event.resourceId])).toEqual([['audit.read', 'pull-ada', ada]]);
    // Bob's report names none of the reads of Ada's (nor the read of the key's, which named no record).
    expect((await read(ws, `recordId=${bob}`)).data).toEqual([]);
    // Ada's reads: the full key's of her report above, then the officer's.
    expect((await read(ws, `recordId=${ada}&action=audit.read`)).data.map((event) => [event.requestId, event.keyId])).toEqual([
      [expect.any(String), ws.keyId],
      ['pull-ada', officer.keyId],
    ]);
  });

  it('writes nothing for a read it refuses (a bad filter, limit or cursor, an unknown parameter, a key without audit:read), one for a read it answers', async () => {
    const ws = await env.workspace();
    const lacking = await ws.keyWith(SCOPES.filter((scope) => scope !== 'audit:read'));
    const refused: [string, number, string?][] = [
      ['recordId=not-a-uuid', 400],
      ['keyId=123', 400],
      ['since=2016-12-31T23:59:60Z', 400],
      ['since=yesterday', 400],
      ['record=01900000-0000-7000-8000-000000000000', 400],
      ['limit=0', 400],
      ['limit=101', 400],
      ['cursor=garbage', 400],
      [`cursor=${Buffer.from(JSON.stringify(['0190c0de-0000-7000-8000-000000000001', 'runs'])).toString('base64url')}`, 400],
      ['action=', 400],
      ['limit=5', 403, lacking.key],
    ];
    for (const [query, status, key] of refused) {
      const res = await ws.call('GET', `/v1/audit-events?${query}`, key === undefined ? {} : { key });
      expect(res.statusCode, query).toBe(status);
    }
    expect((await ws.call('GET', '/v1/audit-events', { key: null })).statusCode).toBe(401);
    expect(await stored(env, ws, 'audit.read')).toBe(0);
    // The same read answered, by a key with the scope: one event.
    await read(ws, 'limit=5', { key: (await ws.keyWith(['audit:read'])).key });
    expect(await stored(env, ws, 'audit.read')).toBe(1);
  });

  it('does not answer a page whose audit.read cannot be written', async () => {
    const ws = await env.workspace();
    await seedEvents(env, ws, [queryCreate(0)]);
    await refusingAudit(env, 'audit.read', async () => {
      const res = await ws.call('GET', '/v1/audit-events');
      expect(res.statusCode).toBe(500);
      expect(res.json()).toMatchObject({ code: 'internal' });
      expect(res.body).not.toContain('q-0');
    });
    expect(await stored(env, ws, 'audit.read')).toBe(0);
  });

  it("never shows a workspace's reads to another workspace's key, of the same tenant or another", async () => {
    const ws = await env.workspace();
    const sibling = await env.workspace(`tenant-of-${ws.workspaceId}`);
    const stranger = await env.workspace();
    const ada = await insertPatient(env, ws, 'mrn-read-x');
    await read(ws, `recordId=${ada}`);
    await read(ws, 'limit=100');
    for (const other of [sibling, stranger]) {
      expect((await read(other, 'action=audit.read')).data).toEqual([]);
      expect((await read(other, `recordId=${ada}`)).data).toEqual([]);
      expect((await read(other, `keyId=${ws.keyId}`)).data).toEqual([]);
      // What it sees is its own reads, and only those.
      const own = (await read(other, 'limit=100')).data;
      expect(own.map((event) => event.action)).toEqual(['audit.read', 'audit.read', 'audit.read']);
      expect(own.every((event) => event.workspaceId === other.workspaceId && event.keyId === other.keyId)).toBe(true);
    }
    expect(await stored(env, ws, 'audit.read')).toBe(2);
  });

  it('records an export as audit.export once it has read its last event, never in its own output', async () => {
    const ws = await env.workspace();
    const ada = await insertPatient(env, ws, 'mrn-export-ada');
    // 1,000 events: two full pages of the export's 500, and an empty one after them.
    await seedEvents(env, ws, [
      { action: 'run.create', resourceType: 'run', resourceId: 'r-ada', details: { subjectRecordId: ada } },
      ...Array.from({ length: 999 }, (_, n) => queryCreate(n)),
    ]);

    const whole = await exportLines(env.container, ['--workspace', ws.workspaceId]);
    expect(whole).toHaveLength(1000);
    expect(whole.some((event) => event.action === 'audit.export')).toBe(false);
    const exports = (await read(ws, 'action=audit.export')).data;
    expect(exports).toEqual([
      expect.objectContaining({
        action: 'audit.export',
        keyName: 'carepath admin',
        keyId: null,
        workspaceId: ws.workspaceId,
        resourceType: null,
        resourceId: null,
        outcome: 'success',
        details: { filters: {}, count: 1000 },
      }),
    ]);
    expect(exports[0].requestId).toMatch(/^[0-9a-f-]{36}$/);

    // Ada's export names her record, and is in the next export of her events, not in its own.
    const since = '2000-01-01T00:00:00+01:00';
    const hers = await exportLines(env.container, ['--workspace', ws.workspaceId, '--record', ada, '--since', since]);
    expect(hers.map((event) => event.action)).toEqual(['run.create']);
    const again = await exportLines(env.container, ['--workspace', ws.workspaceId, '--record', ada]);
    expect(again.map((event) => event.action)).toEqual(['run.create', 'audit.export']);
    expect(again[1]).toMatchObject({ resourceType: 'record', resourceId: ada, details: { filters: { recordId: ada, since: '1999-12-31T23:00:00.000Z' }, count: 1 } });
    expect(again[1].requestId).not.toBe(exports[0].requestId);
    // Through the API: her report lists both exports, the key's report (no key: an operator) none.
    expect((await read(ws, `recordId=${ada}&action=audit.export`)).data.map((event) => event.details.count)).toEqual([2, 1]);
    expect((await read(ws, `keyId=${ws.keyId}&action=audit.export`)).data).toEqual([]);
    expect(await stored(env, ws, 'audit.export')).toBe(3);
  });

  it('records an export cut short as a failure with the count handed out, and fails one whose event cannot be written before its last line', async () => {
    const ws = await env.workspace();
    await seedEvents(env, ws, [queryCreate(0), queryCreate(1), queryCreate(2)]);

    // A reader that stops after two events (a closed pipe): two have left.
    const taken: string[] = [];
    for await (const event of auditExport(env.container, { workspaceId: ws.workspaceId })) {
      taken.push(event.resourceId!);
      if (taken.length === 2) break;
    }
    expect(taken).toEqual(['q-0', 'q-1']);
    expect((await read(ws, 'action=audit.export')).data).toEqual([
      expect.objectContaining({ keyName: 'carepath admin', outcome: 'failure', details: { filters: {}, count: 2 } }),
    ]);

    // The store refuses the export's event: the command fails and its last line is never printed.
    let printed = '';
    const out: Output = { write: async (text) => void (printed += text) };
    await refusingAudit(env, 'audit.export', async () => {
      const parsed = parseAdminArgv(['audit', 'export', '--workspace', ws.workspaceId]);
      if (parsed.kind !== 'run') throw new Error('not a command run');
      await expect(parsed.command.execute(env.container, parsed.args, out, false)).rejects.toThrow(/audit refused/);
    });
    const lines = printed.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as EventJson);
    // Held back: the newest event it read (the API's read of the export's events, above).
    expect(lines.map((event) => event.resourceId ?? event.action)).toEqual(['q-0', 'q-1', 'q-2', 'audit.export']);
    expect(await stored(env, ws, 'audit.read')).toBe(1);
    expect(await stored(env, ws, 'audit.export')).toBe(1);
  });
});
