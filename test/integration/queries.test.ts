import { expect, it } from 'vitest';
import { describeEachStore, simpleBlueprint, type TestWorkspace } from '../helpers/test-env.js';

async function createQuery(ws: TestWorkspace, body: Record<string, unknown>) {
  const res = await ws.call('POST', '/v1/queries', { body });
  expect(res.statusCode).toBe(201);
  return res.json();
}

describeEachStore('saved queries', (env) => {
  it('creates a query and reads it back with exactly the spec fields', async () => {
    const ws = await env.workspace();
    const query = await createQuery(ws, {
      name: 'COPD cohort',
      resourceType: 'Patient',
      filters: [
        { op: 'with', tag: 'copd' },
        { op: 'without', tag: 'deceased' },
      ],
    });
    expect(Object.keys(query).sort()).toEqual(['createdAt', 'filters', 'name', 'queryId', 'resourceType', 'updatedAt']);
    expect(query).toMatchObject({
      name: 'COPD cohort',
      resourceType: 'Patient',
      filters: [
        { op: 'with', tag: 'copd' },
        { op: 'without', tag: 'deceased' },
      ],
    });
    expect(query.createdAt).toBe(query.updatedAt);
    const got = await ws.call('GET', `/v1/queries/${query.queryId}`);
    expect(got.statusCode).toBe(200);
    expect(got.json()).toEqual(query);
  });

  it('defaults filters to an empty list', async () => {
    const ws = await env.workspace();
    const query = await createQuery(ws, { name: 'Everyone', resourceType: 'Practitioner' });
    expect(query.filters).toEqual([]);
  });

  it('refuses bad filters: unknown op, tag that is not a slug, more than 20', async () => {
    const ws = await env.workspace();
    const cases = [
      { filters: [{ op: 'maybe', tag: 'copd' }], field: 'body.filters.0.op' },
      { filters: [{ op: 'with', tag: 'Not A Slug' }], field: 'body.filters.0.tag' },
      { filters: [{ op: 'with' }], field: 'body.filters.0.tag' },
      { filters: Array.from({ length: 21 }, (_, i) => ({ op: 'with', tag: `t${i}` })), field: 'body.filters' },
    ];
    for (const { filters, field } of cases) {
      const res = await ws.call('POST', '/v1/queries', { body: { name: 'Q', resourceType: 'Patient', filters } });
      expect(res.statusCode).toBe(400);
      expect(res.json().code).toBe('invalid_request');
      expect(res.json().error).toContain(field);
    }
    const twenty = Array.from({ length: 20 }, (_, i) => ({ op: 'with', tag: `t${i}` }));
    expect((await ws.call('POST', '/v1/queries', { body: { name: 'Q', resourceType: 'Patient', filters: twenty } })).statusCode).toBe(201);
    const list = await ws.call('GET', '/v1/queries');
    expect(list.json().data).toHaveLength(1);
  });

  it('lists newest first, filters by name words and resource type, and pages with a cursor', async () => {
    const ws = await env.workspace();
    const a = await createQuery(ws, { name: 'Diabetes follow-up', resourceType: 'Patient' });
    const b = await createQuery(ws, { name: 'Open pathways', resourceType: 'Pathway' });
    const c = await createQuery(ws, { name: 'DIABETES 100%_done', resourceType: 'Pathway' });

    const all = await ws.call('GET', '/v1/queries');
    expect(all.statusCode).toBe(200);
    expect(all.json().data.map((q: { queryId: string }) => q.queryId)).toEqual([c.queryId, b.queryId, a.queryId]);
    expect(all.json().nextCursor).toBeNull();

    const byName = await ws.call('GET', '/v1/queries?q=diabetes');
    expect(byName.json().data.map((q: { queryId: string }) => q.queryId)).toEqual([c.queryId, a.queryId]);
    // % and _ are taken literally, not as wildcards.
    const literal = await ws.call('GET', `/v1/queries?q=${encodeURIComponent('100%_')}`);
    expect(literal.json().data.map((q: { queryId: string }) => q.queryId)).toEqual([c.queryId]);
    const wildcard = await ws.call('GET', `/v1/queries?q=${encodeURIComponent('%')}`);
    expect(wildcard.json().data.map((q: { queryId: string }) => q.queryId)).toEqual([c.queryId]);

    const byType = await ws.call('GET', '/v1/queries?resourceType=Pathway&q=open');
    expect(byType.json().data.map((q: { queryId: string }) => q.queryId)).toEqual([b.queryId]);

    const first = await ws.call('GET', '/v1/queries?limit=2');
    expect(first.json().data).toHaveLength(2);
    expect(first.json().nextCursor).toEqual(expect.any(String));
    const second = await ws.call('GET', `/v1/queries?limit=2&cursor=${first.json().nextCursor}`);
    expect(second.json().data.map((q: { queryId: string }) => q.queryId)).toEqual([a.queryId]);
    expect(second.json().nextCursor).toBeNull();

    // Any script, not ASCII only (SQLite's own lower() lowers ASCII letters alone).
    const accented = await createQuery(ws, { name: 'Émile Ärzte', resourceType: 'Patient' });
    for (const words of ['Émile', 'émile', 'ÄRZTE']) {
      const found = await ws.call('GET', `/v1/queries?q=${encodeURIComponent(words)}`);
      expect(found.json().data.map((q: { queryId: string }) => q.queryId), words).toEqual([accented.queryId]);
    }
    // Dotted capital I: its exact name, and in any case (JavaScript lowers it to i + U+0307).
    const dotted = await createQuery(ws, { name: 'İstanbul clinic', resourceType: 'Patient' });
    for (const words of ['İstanbul', 'istanbul', 'İSTANBUL']) {
      const found = await ws.call('GET', `/v1/queries?q=${encodeURIComponent(words)}`);
      expect(found.json().data.map((q: { queryId: string }) => q.queryId), words).toEqual([dotted.queryId]);
    }
    for (const words of ['ärzte']) {
      const found = await ws.call('GET', `/v1/queries?q=${encodeURIComponent(words)}`);
      expect(found.json().data.map((q: { queryId: string }) => q.queryId), words).toEqual([accented.queryId]);
    }
  });

  it('updates only the fields sent; an empty filter list clears the filters', async () => {
    const ws = await env.workspace();
    const query = await createQuery(ws, { name: 'Q', resourceType: 'Patient', filters: [{ op: 'with', tag: 'copd' }] });

    const renamed = await ws.call('PATCH', `/v1/queries/${query.queryId}`, { body: { name: 'Renamed' } });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json()).toMatchObject({ name: 'Renamed', resourceType: 'Patient', filters: [{ op: 'with', tag: 'copd' }] });
    expect(renamed.json().createdAt).toBe(query.createdAt);
    expect(Date.parse(renamed.json().updatedAt)).toBeGreaterThanOrEqual(Date.parse(query.updatedAt));

    const retyped = await ws.call('PATCH', `/v1/queries/${query.queryId}`, { body: { resourceType: 'Pathway', filters: [] } });
    expect(retyped.json()).toMatchObject({ name: 'Renamed', resourceType: 'Pathway', filters: [] });
    expect((await ws.call('GET', `/v1/queries/${query.queryId}`)).json()).toEqual(retyped.json());

    const bad = await ws.call('PATCH', `/v1/queries/${query.queryId}`, { body: { name: '' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toContain('body.name');
    const nullFilters = await ws.call('PATCH', `/v1/queries/${query.queryId}`, { body: { filters: null } });
    expect(nullFilters.statusCode).toBe(400);
    expect((await ws.call('GET', `/v1/queries/${query.queryId}`)).json()).toEqual(retyped.json());
  });

  it('deletes a query: 204, then 404 for get, update and delete', async () => {
    const ws = await env.workspace();
    const query = await createQuery(ws, { name: 'Q', resourceType: 'Patient' });
    const deleted = await ws.call('DELETE', `/v1/queries/${query.queryId}`);
    expect(deleted.statusCode).toBe(204);
    expect(deleted.body).toBe('');
    for (const [method, body] of [['GET'], ['PATCH', { name: 'x' }], ['DELETE']] as const) {
      const res = await ws.call(method, `/v1/queries/${query.queryId}`, { body });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ code: 'not_found', requestId: expect.any(String) });
    }
  });

  it('refuses to delete a query an active trigger uses (409 query_in_use), allows it once the trigger is inactive', async () => {
    const ws = await env.workspace();
    const query = await createQuery(ws, { name: 'Cohort', resourceType: 'Patient', filters: [{ op: 'with', tag: 'copd' }] });
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const trigger = await ws.call('POST', '/v1/triggers', {
      body: { name: 'Daily', sourceId: blueprint.id, type: 'search', queryId: query.queryId },
    });
    expect(trigger.statusCode).toBe(201);

    const refused = await ws.call('DELETE', `/v1/queries/${query.queryId}`);
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ code: 'query_in_use', requestId: expect.any(String) });
    expect((await ws.call('GET', `/v1/queries/${query.queryId}`)).statusCode).toBe(200);

    const paused = await ws.call('PATCH', `/v1/triggers/${trigger.json().triggerId}`, { body: { active: false } });
    expect(paused.statusCode).toBe(200);
    expect((await ws.call('DELETE', `/v1/queries/${query.queryId}`)).statusCode).toBe(204);
  });

  it('a delete racing a trigger that takes up the query: one of them wins, never both', async () => {
    const ws = await env.workspace();
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const inactive = await ws.call('POST', '/v1/triggers', {
      body: { name: 'Paused', sourceId: blueprint.id, type: 'search', queryId: (await createQuery(ws, { name: 'Seed', resourceType: 'Patient' })).queryId, active: false },
    });
    for (let i = 0; i < 15; i++) {
      const query = await createQuery(ws, { name: `Cohort ${i}`, resourceType: 'Patient' });
      // Every other round the trigger comes from PATCH (pointing a paused trigger at the query).
      const takeUp =
        i % 2 === 0
          ? ws.call('POST', '/v1/triggers', { body: { name: `Daily ${i}`, sourceId: blueprint.id, type: 'search', queryId: query.queryId } })
          : ws.call('PATCH', `/v1/triggers/${inactive.json().triggerId}`, { body: { queryId: query.queryId, active: true } });
      const [taken, deleted] = await Promise.all([takeUp, ws.call('DELETE', `/v1/queries/${query.queryId}`)]);
      const outcome = `${taken.statusCode}/${deleted.statusCode}`;
      // The trigger first: the delete is refused. The delete first: the trigger is refused.
      expect(['201/409', '200/409', '400/204'], `${outcome} ${taken.body} ${deleted.body}`).toContain(outcome);
      if (deleted.statusCode === 204) expect(taken.json()).toMatchObject({ code: 'invalid_request' });
      if (i % 2 === 1 && taken.statusCode === 200) {
        await ws.call('PATCH', `/v1/triggers/${inactive.json().triggerId}`, { body: { active: false } });
      }
    }
    // No active trigger points at a query that is gone.
    const dangling = await env.db
      .selectFrom('triggers')
      .leftJoin('queries', 'queries.id', 'triggers.query_id')
      .select('triggers.id')
      .where('triggers.workspace_id', '=', ws.workspaceId)
      .where('triggers.active', '=', 1)
      .where('triggers.type', '=', 'search')
      .where('queries.id', 'is', null)
      .execute();
    expect(dangling).toEqual([]);
  });

  it('allows deleting a query whose trigger was deleted', async () => {
    const ws = await env.workspace();
    const query = await createQuery(ws, { name: 'Cohort', resourceType: 'Patient' });
    const blueprint = await ws.importBlueprint(simpleBlueprint());
    const trigger = await ws.call('POST', '/v1/triggers', {
      body: { name: 'On demand', sourceId: blueprint.id, type: 'search', queryId: query.queryId },
    });
    expect((await ws.call('DELETE', `/v1/triggers/${trigger.json().triggerId}`)).statusCode).toBe(204);
    expect((await ws.call('DELETE', `/v1/queries/${query.queryId}`)).statusCode).toBe(204);
  });

  it('keeps workspaces apart', async () => {
    const mine = await env.workspace();
    const theirs = await env.workspace();
    const query = await createQuery(mine, { name: 'Private', resourceType: 'Patient' });
    expect((await theirs.call('GET', `/v1/queries/${query.queryId}`)).statusCode).toBe(404);
    expect((await theirs.call('GET', '/v1/queries')).json().data).toEqual([]);
  });

  it('needs queries:read to read and queries:write to change', async () => {
    const ws = await env.workspace();
    const reader = await ws.keyWith(['queries:read']);
    const writer = await ws.keyWith(['queries:write']);
    const refused = await ws.call('POST', '/v1/queries', { key: reader.key, body: { name: 'Q', resourceType: 'Patient' } });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toMatchObject({ code: 'insufficient_scope' });
    expect(refused.json().error).toContain('queries:write');
    const created = await ws.call('POST', '/v1/queries', { key: writer.key, body: { name: 'Q', resourceType: 'Patient' } });
    expect(created.statusCode).toBe(201);
    expect((await ws.call('GET', '/v1/queries', { key: writer.key })).statusCode).toBe(403);
    expect((await ws.call('GET', `/v1/queries/${created.json().queryId}`, { key: reader.key })).statusCode).toBe(200);
  });
});
