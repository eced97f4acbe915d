import { expect, it } from 'vitest';
import { sql } from 'kysely';
import { describeEachStore, simpleBlueprint, type TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { insertRecords, type RecordInput } from '../../src/modules/records/record.repository.js';
import { findMatches, findRecordPage } from '../../src/modules/search/search.repository.js';
import { searchExecutedAroundIds } from '../../src/modules/search/search-audit.js';
import { systemContext } from '../../src/auth/context.js';

interface Hit {
  id: string;
  extId: string;
  name: string;
  resourceType: string;
  tags: string[];
}

/** Names share one capitalisation so byte order (SQLite) and locale order (PostgreSQL) agree. */
const PATIENTS: RecordInput[] = [
  { resourceType: 'Patient', extId: 'p-3', name: 'Carol Chen', tags: ['copd', 'smoker'] },
  { resourceType: 'Patient', extId: 'p-1', name: 'Alice Adams', tags: ['copd'] },
  { resourceType: 'Patient', extId: 'p-4', name: 'Dan Diaz', tags: ['diabetes'] },
  { resourceType: 'Patient', extId: 'p-2', name: 'Bob Brown', tags: ['copd', 'diabetes', 'smoker'] },
  { resourceType: 'Patient', extId: 'p-5', name: 'Eve Evans', tags: [] },
];

async function seed(env: TestEnv, ws: TestWorkspace, records: RecordInput[], at = new Date().toISOString()) {
  return insertRecords(env.db, ws.workspaceId, records, at);
}

async function search(ws: TestWorkspace, body: Record<string, unknown>) {
  const res = await ws.call('POST', '/v1/search', { body });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { total: number; limit: number; offset: number; results: Hit[] };
}

const names = (hits: Hit[]) => hits.map((hit) => hit.name);

async function auditOf(ws: TestWorkspace) {
  const res = await ws.call('GET', '/v1/audit-events?action=search.execute');
  return res.json().data as { resourceType: string; resourceId: string | null; requestId: string; keyId: string; details: Record<string, unknown> }[];
}

describeEachStore('search', (env) => {
  it('finds records of one type, ordered by name, with their tags, and the paging fields', async () => {
    const ws = await env.workspace();
    await seed(env, ws, PATIENTS);
    await seed(env, ws, [{ resourceType: 'Practitioner', extId: 'dr-1', name: 'Alice Adams', tags: ['copd'] }]);
    const result = await search(ws, { resourceType: 'Patient' });
    expect(result).toMatchObject({ total: 5, limit: 100, offset: 0 });
    expect(names(result.results)).toEqual(['Alice Adams', 'Bob Brown', 'Carol Chen', 'Dan Diaz', 'Eve Evans']);
    const bob = result.results[1];
    expect(Object.keys(bob).sort()).toEqual(['extId', 'id', 'name', 'resourceType', 'tags']);
    expect(bob).toMatchObject({ extId: 'p-2', resourceType: 'Patient', tags: ['copd', 'diabetes', 'smoker'] });
    expect(result.results[4].tags).toEqual([]);
  });

  it('ANDs with and without filters', async () => {
    const ws = await env.workspace();
    await seed(env, ws, PATIENTS);
    const copd = await search(ws, { resourceType: 'Patient', filters: [{ op: 'with', tag: 'copd' }] });
    expect(names(copd.results)).toEqual(['Alice Adams', 'Bob Brown', 'Carol Chen']);
    const copdSmokers = await search(ws, {
      resourceType: 'Patient',
      filters: [
        { op: 'with', tag: 'copd' },
        { op: 'with', tag: 'smoker' },
      ],
    });
    expect(names(copdSmokers.results)).toEqual(['Bob Brown', 'Carol Chen']);
    const copdNoDiabetes = await search(ws, {
      resourceType: 'Patient',
      filters: [
        { op: 'with', tag: 'copd' },
        { op: 'without', tag: 'diabetes' },
      ],
    });
    expect(copdNoDiabetes.total).toBe(2);
    expect(names(copdNoDiabetes.results)).toEqual(['Alice Adams', 'Carol Chen']);
    const noCopd = await search(ws, { resourceType: 'Patient', filters: [{ op: 'without', tag: 'copd' }] });
    expect(names(noCopd.results)).toEqual(['Dan Diaz', 'Eve Evans']);
    const none = await search(ws, { resourceType: 'Patient', filters: [{ op: 'with', tag: 'unknown-tag' }] });
    expect(none).toMatchObject({ total: 0, results: [] });
  });

  it('orders by each allowed field in both directions, ties broken by id', async () => {
    const ws = await env.workspace();
    const early = '2024-01-01T00:00:00.000Z';
    const late = '2024-06-01T00:00:00.000Z';
    const [zed] = await seed(env, ws, [{ resourceType: 'Patient', extId: 'a-1', name: 'Zed Zane', tags: [] }], early);
    const twins = await seed(
      env,
      ws,
      [
        { resourceType: 'Patient', extId: 'c-1', name: 'Sam Same', tags: [] },
        { resourceType: 'Patient', extId: 'b-1', name: 'Sam Same', tags: [] },
      ],
      late,
    );
    const ids = (result: { results: Hit[] }) => result.results.map((hit) => hit.id);
    const sortedTwins = [...twins].sort();

    expect(ids(await search(ws, { resourceType: 'Patient' }))).toEqual([...sortedTwins, zed]);
    expect(ids(await search(ws, { resourceType: 'Patient', orderDirection: 'desc' }))).toEqual([zed, ...[...sortedTwins].reverse()]);
    expect(ids(await search(ws, { resourceType: 'Patient', order: 'createdAt' }))).toEqual([zed, ...sortedTwins]);
    expect(ids(await search(ws, { resourceType: 'Patient', order: 'updatedAt', orderDirection: 'desc' }))).toEqual([
      ...[...sortedTwins].reverse(),
      zed,
    ]);
    expect(ids(await search(ws, { resourceType: 'Patient', order: 'extId' }))).toEqual([zed, twins[1], twins[0]]);
  });

  it('pages with limit and offset; an offset past the end answers no results and the total', async () => {
    const ws = await env.workspace();
    await seed(env, ws, PATIENTS);
    const pages: string[] = [];
    for (let offset = 0; offset < 5; offset += 2) {
      const page = await search(ws, { resourceType: 'Patient', limit: 2, offset });
      expect(page).toMatchObject({ total: 5, limit: 2, offset });
      pages.push(...names(page.results));
    }
    expect(pages).toEqual(['Alice Adams', 'Bob Brown', 'Carol Chen', 'Dan Diaz', 'Eve Evans']);
    expect(await search(ws, { resourceType: 'Patient', offset: 50 })).toMatchObject({ total: 5, offset: 50, results: [] });
  });

  it('counts with the same body', async () => {
    const ws = await env.workspace();
    await seed(env, ws, PATIENTS);
    const count = await ws.call('POST', '/v1/search/count', { body: { resourceType: 'Patient', filters: [{ op: 'with', tag: 'smoker' }] } });
    expect(count.statusCode).toBe(200);
    expect(count.json()).toEqual({ total: 2 });
    const all = await ws.call('POST', '/v1/search/count', { body: { resourceType: 'Patient', limit: 1, offset: 3, order: 'extId' } });
    expect(all.json()).toEqual({ total: 5 });
    const none = await ws.call('POST', '/v1/search/count', { body: { resourceType: 'Practitioner' } });
    expect(none.json()).toEqual({ total: 0 });
  });

  it('sees only the workspace of the key', async () => {
    const mine = await env.workspace();
    const sameTenant = await env.workspace();
    await seed(env, mine, PATIENTS);
    await seed(env, sameTenant, [{ resourceType: 'Patient', extId: 'p-1', name: 'Other Person', tags: ['copd'] }]);
    expect((await search(mine, { resourceType: 'Patient', filters: [{ op: 'with', tag: 'copd' }] })).total).toBe(3);
    const theirs = await search(sameTenant, { resourceType: 'Patient' });
    expect(names(theirs.results)).toEqual(['Other Person']);
  });

  it('finds a fired run as a Pathway record by its automation status tag', async () => {
    const ws = await env.workspace();
    const blueprint = await ws.importBlueprint(simpleBlueprint('Discharge follow-up'));
    const trigger = await ws.call('POST', '/v1/triggers', { body: { name: 'Web', sourceId: blueprint.id, type: 'web' } });
    const fire = (body: Record<string, unknown>) => ws.call('POST', `/v1/triggers/${trigger.json().triggerId}`, { body });
    const scheduled = (await fire({})).json();
    const queued = (await fire({ autoStart: false })).json();
    expect(scheduled.automationStatus).toBe('scheduled');

    const byStatus = async (tag: string) =>
      (await search(ws, { resourceType: 'Pathway', filters: [{ op: 'with', tag }] })).results.map((hit) => hit.id);
    const found = await search(ws, { resourceType: 'Pathway', filters: [{ op: 'with', tag: 'scheduled' }] });
    expect(found.results).toEqual([
      { id: scheduled.runId, extId: scheduled.runId, name: 'Discharge follow-up', resourceType: 'Pathway', tags: ['scheduled'] },
    ]);
    expect(await byStatus('queued')).toEqual([queued.runId]);

    // pause then resume: the run becomes running, and its tag follows.
    expect((await ws.call('POST', `/v1/runs/${scheduled.runId}/pause`)).statusCode).toBe(200);
    expect((await ws.call('POST', `/v1/runs/${scheduled.runId}/resume`)).statusCode).toBe(200);
    expect(await byStatus('running')).toEqual([scheduled.runId]);
    expect(await byStatus('scheduled')).toEqual([]);
    const notRunning = await search(ws, { resourceType: 'Pathway', filters: [{ op: 'without', tag: 'running' }] });
    expect(notRunning.results.map((hit) => hit.id)).toEqual([queued.runId]);
    expect((await search(ws, { resourceType: 'Patient' })).total).toBe(0);
  });

  it('audits Patient and Pathway searches with the filters and ids returned; not Practitioner ones', async () => {
    const ws = await env.workspace();
    await seed(env, ws, PATIENTS);
    await seed(env, ws, [{ resourceType: 'Practitioner', extId: 'dr-1', name: 'Doctor Who', tags: [] }]);
    const filters = [{ op: 'with', tag: 'copd' }];
    const result = await ws.call('POST', '/v1/search', {
      body: { resourceType: 'Patient', filters, limit: 2 },
      headers: { 'x-request-id': 'search-req-1' },
    });
    expect(result.statusCode).toBe(200);
    await search(ws, { resourceType: 'Practitioner' });
    await search(ws, { resourceType: 'Pathway' });

    const events = await auditOf(ws);
    expect(events).toHaveLength(2);
    const [pathway, patient] = events;
    expect(patient).toMatchObject({ resourceType: 'search', resourceId: null, requestId: 'search-req-1', keyId: ws.keyId });
    expect(patient.details).toEqual({
      resourceType: 'Patient',
      filters,
      total: 3,
      limit: 2,
      offset: 0,
      ids: result.json().results.map((hit: Hit) => hit.id),
    });
    expect(pathway.details).toMatchObject({ resourceType: 'Pathway', ids: [], total: 0 });
  });

  it('stores the audit details as text exactly as JSON.stringify would, ids in page order, whichever way the page is read', async () => {
    const ws = await env.workspace();
    const many: RecordInput[] = Array.from({ length: 40 }, (_, i) => ({
      resourceType: 'Patient',
      extId: `m-${i}`,
      name: `Many ${String(i % 7).padStart(2, '0')}`, // ties in name: the id breaks them
      tags: i % 2 === 0 ? ['even'] : i === 39 ? ['rare'] : [],
    }));
    await seed(env, ws, many);
    // A common tag is walked (on PostgreSQL, by one statement that also writes the audit row);
    // a rare one is fetched and sorted, and its audit row written on its own.
    const bodies = [
      { resourceType: 'Patient', filters: [{ op: 'with', tag: 'even' }], order: 'name', orderDirection: 'desc', limit: 7, offset: 3 },
      { resourceType: 'Patient', filters: [{ tag: 'rare', op: 'with' }, { op: 'without', tag: 'even' }], limit: 5 },
      { resourceType: 'Patient', filters: [{ op: 'with', tag: 'even' }], order: 'extId', offset: 19 },
    ];
    for (const body of bodies) {
      const res = await ws.call('POST', '/v1/search', { body });
      expect(res.statusCode, res.body).toBe(200);
      const answer = res.json() as { total: number; limit: number; offset: number; results: Hit[] };
      const [row] = await env.db
        .selectFrom('audit_events')
        .select(['details'])
        .where('workspace_id', '=', ws.workspaceId)
        .where('action', '=', 'search.execute')
        .orderBy('id', 'desc')
        .limit(1)
        .execute();
      expect(row.details).toBe(
        JSON.stringify({
          resourceType: 'Patient',
          filters: body.filters,
          total: answer.total,
          limit: answer.limit,
          offset: answer.offset,
          ids: answer.results.map((hit) => hit.id),
        }),
      );
    }
    expect(await auditOf(ws)).toHaveLength(bodies.length);
  });

  it('on PostgreSQL writes the audit row of a walked page in the page statement itself; on SQLite leaves it to the service', async () => {
    const ws = await env.workspace();
    await seed(env, ws, PATIENTS);
    const criteria = { resourceType: 'Patient' as const, filters: [{ op: 'with' as const, tag: 'copd' }] };
    const matches = await findMatches(env.db, ws.workspaceId, criteria);
    const facts = { ...criteria, total: matches.total, limit: 2, offset: 1 };
    const ctx = systemContext(ws.tenantId, ws.workspaceId, 'page-statement-audit');
    const page = await findRecordPage(env.db, ws.workspaceId, matches, { order: 'name', direction: 'asc', limit: 2, offset: 1 }, () =>
      searchExecutedAroundIds(ctx, new Date().toISOString(), facts),
    );
    expect(page.hits.map((hit) => hit.name)).toEqual(['Bob Brown', 'Carol Chen']);
    expect(page.audited).toBe(env.kind === 'postgres');
    const rows = await env.db.selectFrom('audit_events').selectAll().where('request_id', '=', 'page-statement-audit').execute();
    if (env.kind === 'sqlite') {
      expect(rows).toEqual([]);
      return;
    }
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ workspace_id: ws.workspaceId, tenant_id: ws.tenantId, action: 'search.execute', resource_type: 'search', resource_id: null, outcome: 'success' });
    expect(JSON.parse(rows[0].details)).toEqual({ ...facts, ids: page.hits.map((hit) => hit.id) });
  });

  it('answers 500 and no records when the audit row cannot be written, whichever way the page is read', async () => {
    const ws = await env.workspace();
    await seed(env, ws, PATIENTS);
    const refuse =
      env.kind === 'sqlite'
        ? [sql`create trigger refuse_search_audit before insert on audit_events when new.action = 'search.execute'
            begin select raise(abort, 'audit refused'); end`]
        : [
            sql`create function refuse_search_audit() returns trigger language plpgsql as $$
              begin if new.action = 'search.execute' then raise exception 'audit refused'; end if; return new; end $$`,
            sql`create trigger refuse_search_audit before insert on audit_events for each row execute function refuse_search_audit()`,
          ];
    for (const statement of refuse) await statement.execute(env.db);
    try {
      for (const body of [
        { resourceType: 'Patient', filters: [{ op: 'with', tag: 'copd' }], limit: 2 }, // walked
        { resourceType: 'Patient', filters: [{ op: 'without', tag: 'copd' }, { op: 'without', tag: 'diabetes' }] }, // fetched
        { resourceType: 'Patient', offset: 10 }, // past the end: no page read at all
      ]) {
        for (const url of ['/v1/search', '/v1/search/count']) {
          const res = await ws.call('POST', url, { body });
          expect(res.statusCode, `${url} ${JSON.stringify(body)}`).toBe(500);
          expect(res.json()).toMatchObject({ code: 'internal' });
          expect(res.body).not.toContain('Alice');
          expect(res.json()).not.toHaveProperty('results');
          expect(res.json()).not.toHaveProperty('total');
        }
      }
      // Practitioner searches write no audit row, so they still answer.
      expect((await ws.call('POST', '/v1/search', { body: { resourceType: 'Practitioner' } })).statusCode).toBe(200);
    } finally {
      await sql`drop trigger refuse_search_audit ${sql.raw(env.kind === 'postgres' ? 'on audit_events' : '')}`.execute(env.db);
      if (env.kind === 'postgres') await sql`drop function refuse_search_audit()`.execute(env.db);
    }
    expect(await auditOf(ws)).toEqual([]);
    expect((await search(ws, { resourceType: 'Patient', filters: [{ op: 'with', tag: 'copd' }] })).total).toBe(3);
  });

  it('audits a Patient count with its total and no ids', async () => {
    const ws = await env.workspace();
    await seed(env, ws, PATIENTS);
    await ws.call('POST', '/v1/search/count', { body: { resourceType: 'Patient', filters: [{ op: 'without', tag: 'copd' }] } });
    await ws.call('POST', '/v1/search/count', { body: { resourceType: 'Practitioner' } });
    const events = await auditOf(ws);
    expect(events).toHaveLength(1);
    expect(events[0].details).toEqual({ resourceType: 'Patient', filters: [{ op: 'without', tag: 'copd' }], total: 2, countOnly: true });
  });

  it('refuses bodies out of bounds, naming the field, and audits nothing', async () => {
    const ws = await env.workspace();
    const cases: [Record<string, unknown>, string][] = [
      [{}, 'body.resourceType is required'],
      [{ resourceType: 'Encounter' }, 'body.resourceType'],
      [{ resourceType: 'Patient', limit: 0 }, 'body.limit'],
      [{ resourceType: 'Patient', limit: 501 }, 'body.limit must be <= 500'],
      [{ resourceType: 'Patient', offset: -1 }, 'body.offset'],
      [{ resourceType: 'Patient', offset: 100_001 }, 'body.offset must be <= 100000'],
      [{ resourceType: 'Patient', offset: 1.5 }, 'body.offset'],
      [{ resourceType: 'Patient', order: 'birthDate' }, 'body.order'],
      [{ resourceType: 'Patient', orderDirection: 'up' }, 'body.orderDirection'],
      [{ resourceType: 'Patient', filters: [{ op: 'with', tag: 'UPPER' }] }, 'body.filters.0.tag must be a tag: 1–64 lowercase letters, digits, ".", "_", ":" or "-"'],
      [{ resourceType: 'Patient', filters: Array.from({ length: 21 }, () => ({ op: 'with', tag: 'a' })) }, 'body.filters'],
    ];
    for (const [body, message] of cases) {
      for (const url of ['/v1/search', '/v1/search/count']) {
        const res = await ws.call('POST', url, { body });
        expect(res.statusCode, `${url} ${JSON.stringify(body)}`).toBe(400);
        expect(res.json()).toMatchObject({ code: 'invalid_request', requestId: expect.any(String) });
        expect(res.json().error).toContain(message);
      }
    }
    expect(await search(ws, { resourceType: 'Patient', limit: 500, offset: 100_000 })).toMatchObject({ total: 0, limit: 500 });
    expect(await auditOf(ws)).toHaveLength(1);
  });

  it('needs search:read', async () => {
    const ws = await env.workspace();
    const other = await ws.keyWith(['queries:read', 'queries:write']);
    const reader = await ws.keyWith(['search:read']);
    for (const url of ['/v1/search', '/v1/search/count']) {
      const refused = await ws.call('POST', url, { key: other.key, body: { resourceType: 'Patient' } });
      expect(refused.statusCode).toBe(403);
      expect(refused.json()).toMatchObject({ code: 'insufficient_scope' });
      expect(refused.json().error).toContain('search:read');
      expect((await ws.call('POST', url, { key: reader.key, body: { resourceType: 'Patient' } })).statusCode).toBe(200);
    }
  });
});
