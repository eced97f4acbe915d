import { expect, it } from 'vitest';
import type { KyselyPlugin, RootOperationNode } from 'kysely';
import { describeEachStore, simpleBlueprint, type TestWorkspace } from '../helpers/test-env.js';
import { listDiagrams } from '../../src/modules/diagrams/diagram.repository.js';
import { sqliteConnectionOf } from '../../src/storage/connect.js';

async function fireRun(ws: TestWorkspace, blueprintId: string): Promise<string> {
  const trigger = await ws.call('POST', '/v1/triggers', { body: { name: 'Web', sourceId: blueprintId, type: 'web' } });
  expect(trigger.statusCode).toBe(201);
  const run = await ws.call('POST', `/v1/triggers/${trigger.json().triggerId}`, { body: {} });
  expect(run.statusCode).toBe(201);
  return run.json().runId;
}

const ids = (res: { json(): { data: { id: string }[] } }) => res.json().data.map((d) => d.id);

describeEachStore('diagrams', (env) => {
  it('lists blueprints by default, newest first, with the metadata fields', async () => {
    const ws = await env.workspace();
    const first = await ws.importBlueprint({ ...simpleBlueprint('Post-discharge follow-up'), tags: ['discharge'] });
    const second = await ws.importBlueprint(simpleBlueprint('Asthma review'));
    await fireRun(ws, first.id);

    const res = await ws.call('GET', '/v1/diagrams');
    expect(res.statusCode).toBe(200);
    expect(ids(res)).toEqual([second.id, first.id]);
    expect(res.json().nextCursor).toBeNull();
    const blueprint = res.json().data[1];
    expect(Object.keys(blueprint).sort()).toEqual(['createdAt', 'id', 'name', 'tags', 'type', 'updatedAt', 'version']);
    expect(blueprint).toMatchObject({ id: first.id, type: 'blueprint', name: 'Post-discharge follow-up', version: 1, tags: ['discharge'] });
  });

  it('lists the instance of every run, and the instances of one blueprint', async () => {
    const ws = await env.workspace();
    const a = await ws.importBlueprint(simpleBlueprint('A pathway'));
    const b = await ws.importBlueprint(simpleBlueprint('B pathway'));
    const runA1 = await fireRun(ws, a.id);
    const runB = await fireRun(ws, b.id);
    const runA2 = await fireRun(ws, a.id);

    const instances = await ws.call('GET', '/v1/diagrams?type=instance');
    expect(ids(instances)).toEqual([runA2, runB, runA1]);
    expect(instances.json().data[0]).toMatchObject({ id: runA2, type: 'instance', name: 'A pathway', sourceId: a.id, version: 1 });

    const ofA = await ws.call('GET', `/v1/diagrams?type=instance&sourceId=${a.id}`);
    expect(ids(ofA)).toEqual([runA2, runA1]);
    // sourceId alone means instances: a blueprint has no source.
    const implied = await ws.call('GET', `/v1/diagrams?sourceId=${b.id}`);
    expect(ids(implied)).toEqual([runB]);
    const contradictory = await ws.call('GET', `/v1/diagrams?type=blueprint&sourceId=${a.id}`);
    expect(contradictory.statusCode).toBe(400);
    expect(contradictory.json()).toMatchObject({ code: 'invalid_request', requestId: expect.any(String) });
    expect(contradictory.json().error).toContain('sourceId');
  });

  it('searches names in any case (of any script), with % and _ taken literally', async () => {
    const ws = await env.workspace();
    const copd = await ws.importBlueprint(simpleBlueprint('COPD exacerbation'));
    await ws.importBlueprint(simpleBlueprint('Heart failure'));
    const odd = await ws.importBlueprint(simpleBlueprint('Week_1 100% plan'));
    const accented = await ws.importBlueprint(simpleBlueprint('Évaluation Übersicht ΔΙΑΒΉΤΗΣ'));
    expect(ids(await ws.call('GET', '/v1/diagrams?q=copd'))).toEqual([copd.id]);
    // SQLite's own lower() knows ASCII only: these found nothing there.
    for (const words of ['Évaluation', 'évaluation', 'ÜBERSICHT', 'διαβήτης']) {
      expect(ids(await ws.call('GET', `/v1/diagrams?q=${encodeURIComponent(words)}`)), words).toEqual([accented.id]);
    }
    expect(ids(await ws.call('GET', `/v1/diagrams?q=${encodeURIComponent('_1 100%')}`))).toEqual([odd.id]);
    expect(ids(await ws.call('GET', '/v1/diagrams?q=nothing-like-this'))).toEqual([]);
  });

  it('searches instances by name: the runs of the blueprints so named, newest first, paged', async () => {
    const ws = await env.workspace();
    const other = await env.workspace();
    const copd = await ws.importBlueprint(simpleBlueprint('COPD check-in'));
    const diabetes = await ws.importBlueprint(simpleBlueprint('Diabetes review'));
    const copdRuns = [await fireRun(ws, copd.id), await fireRun(ws, copd.id)];
    await fireRun(ws, diabetes.id);
    const theirs = await other.importBlueprint(simpleBlueprint('COPD elsewhere'));
    await fireRun(other, theirs.id);
    expect(ids(await ws.call('GET', '/v1/diagrams?type=instance&q=copd'))).toEqual([...copdRuns].reverse());
    expect(ids(await ws.call('GET', '/v1/diagrams?type=instance&q=CHECK-IN'))).toEqual([...copdRuns].reverse());
    expect(ids(await ws.call('GET', '/v1/diagrams?type=instance&q=nothing-like-this'))).toEqual([]);
    expect(ids(await ws.call('GET', `/v1/diagrams?type=instance&q=copd&sourceId=${diabetes.id}`))).toEqual([]);
    expect(ids(await ws.call('GET', `/v1/diagrams?type=instance&q=copd&sourceId=${copd.id}`))).toEqual([...copdRuns].reverse());
    const first = (await ws.call('GET', '/v1/diagrams?type=instance&q=copd&limit=1')).json();
    expect(first.data.map((d: { id: string }) => d.id)).toEqual([copdRuns[1]]);
    expect(ids(await ws.call('GET', `/v1/diagrams?type=instance&q=copd&limit=1&cursor=${first.nextCursor}`))).toEqual([copdRuns[0]]);
  });

  it('gets one diagram: a blueprint without sourceId, an instance with it', async () => {
    const ws = await env.workspace();
    const blueprint = await ws.importBlueprint(simpleBlueprint('Pathway'));
    const runId = await fireRun(ws, blueprint.id);

    const got = await ws.call('GET', `/v1/diagrams/${blueprint.id}`);
    expect(got.statusCode).toBe(200);
    expect(got.json()).toMatchObject({ id: blueprint.id, type: 'blueprint', name: 'Pathway', version: 1, tags: [] });
    expect(got.json()).not.toHaveProperty('sourceId');

    const instance = await ws.call('GET', `/v1/diagrams/${runId}`);
    expect(instance.statusCode).toBe(200);
    expect(instance.json()).toMatchObject({ id: runId, type: 'instance', name: 'Pathway', sourceId: blueprint.id, version: 1 });
  });

  it('shows the new version of a re-imported blueprint; its instances keep theirs', async () => {
    const ws = await env.workspace();
    const v1 = await ws.importBlueprint(simpleBlueprint('Versioned'));
    const runId = await fireRun(ws, v1.id);
    const v2 = await ws.importBlueprint(simpleBlueprint('Versioned'));
    expect(v2).toMatchObject({ id: v1.id, version: 2 });
    expect((await ws.call('GET', `/v1/diagrams/${v1.id}`)).json().version).toBe(2);
    expect((await ws.call('GET', `/v1/diagrams/${runId}`)).json().version).toBe(1);
  });

  it('keeps one blueprint per name when imports of it race (each its own transaction)', async () => {
    const ws = await env.workspace();
    const imports = await Promise.all(Array.from({ length: 8 }, () => ws.importBlueprint(simpleBlueprint('Raced'))));
    expect(new Set(imports.map((imported) => imported.id)).size).toBe(1);
    expect(imports.map((imported) => imported.version).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    const listed = (await ws.call('GET', '/v1/diagrams?q=Raced')).json().data;
    expect(listed).toEqual([expect.objectContaining({ id: imports[0].id, version: 8 })]);
  });

  it('answers 404 for unknown ids, ids of another workspace and ids that are not UUIDs', async () => {
    const ws = await env.workspace();
    const other = await env.workspace();
    const theirs = await other.importBlueprint(simpleBlueprint('Theirs'));
    for (const id of [theirs.id, '0190a8c2-7f8e-7b3a-9c1d-2e4f5a6b7c8d', 'not-a-uuid']) {
      const res = await ws.call('GET', `/v1/diagrams/${id}`);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ code: 'not_found', requestId: expect.any(String) });
    }
    expect((await ws.call('GET', '/v1/diagrams')).json().data).toEqual([]);
  });

  it('pages with limit and cursor', async () => {
    const ws = await env.workspace();
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await ws.importBlueprint(simpleBlueprint(`Pathway ${i}`))).id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await ws.call('GET', `/v1/diagrams?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.statusCode).toBe(200);
      expect(res.json().data.length).toBeLessThanOrEqual(2);
      seen.push(...ids(res));
      cursor = res.json().nextCursor;
    } while (cursor);
    expect(seen).toEqual([...made].reverse());
  });

  it('refuses out-of-range and unknown query parameters', async () => {
    const ws = await env.workspace();
    for (const [query, field] of [
      ['limit=0', 'querystring.limit'],
      ['limit=101', 'querystring.limit'],
      ['type=template', 'querystring.type'],
      ['sourceId=nope', 'querystring.sourceId'],
      ['color=red', 'color'],
    ]) {
      const res = await ws.call('GET', `/v1/diagrams?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json().code).toBe('invalid_request');
      expect(res.json().error).toContain(field);
    }
    const badCursor = await ws.call('GET', '/v1/diagrams?cursor=not-a-cursor');
    expect(badCursor.statusCode).toBe(400);
    expect(badCursor.json().code).toBe('invalid_cursor');
    // A cursor pages the list that handed it out, and no other.
    await ws.importBlueprint(simpleBlueprint('One'));
    await ws.importBlueprint(simpleBlueprint('Two'));
    const cursor = (await ws.call('GET', '/v1/diagrams?limit=1')).json().nextCursor as string;
    expect((await ws.call('GET', `/v1/diagrams?limit=1&cursor=${cursor}`)).statusCode).toBe(200);
    for (const other of ['/v1/diagrams?type=instance&', '/v1/triggers?', '/v1/queries?', '/v1/runs?']) {
      const res = await ws.call('GET', `${other}cursor=${cursor}`);
      expect(res.statusCode, other).toBe(400);
      expect(res.json().code).toBe('invalid_cursor');
    }
  });

  it('needs diagrams:read', async () => {
    const ws = await env.workspace();
    const blueprint = await ws.importBlueprint(simpleBlueprint('Scoped'));
    const without = await ws.keyWith(['triggers:read']);
    const reader = await ws.keyWith(['diagrams:read']);
    for (const url of ['/v1/diagrams', `/v1/diagrams/${blueprint.id}`]) {
      const refused = await ws.call('GET', url, { key: without.key });
      expect(refused.statusCode).toBe(403);
      expect(refused.json().code).toBe('insufficient_scope');
      expect(refused.json().error).toContain('diagrams:read');
      expect((await ws.call('GET', url, { key: reader.key })).statusCode).toBe(200);
    }
  });
});

describeEachStore('instances by name over many runs', (env) => {
  // A name that matches several blueprints reads each one's runs through its own index range,
  // never the workspace's runs one by one (a cost review: on SQLite `source_id in (…) order by
  // id desc` walked `runs_list`, every run of the workspace when the blueprints named had none).
  it('pages the runs of every blueprint named, newest first, each read from its blueprint index range', async () => {
    const ws = await env.workspace();
    const alpha = await ws.importBlueprint(simpleBlueprint('Alpha'));
    const betas = [await ws.importBlueprint(simpleBlueprint('Beta one')), await ws.importBlueprint(simpleBlueprint('Beta two'))];
    const runId = (n: number) => `0190a000-0000-7000-8000-${String(n).padStart(12, '0')}`;
    const source = (n: number) => (n % 500 === 7 ? betas[0].id : n % 700 === 3 ? betas[1].id : alpha.id);
    const now = new Date().toISOString();
    const rows = Array.from({ length: 3000 }, (_, i) => ({
      id: runId(i + 1), workspace_id: ws.workspaceId, trigger_id: runId(0), source_id: source(i + 1), source_version: 1,
      name: 'x', automation_status: 'running', created_at: now, updated_at: now,
    }));
    for (let i = 0; i < rows.length; i += 500) await env.db.insertInto('runs').values(rows.slice(i, i + 500)).execute();
    const expected = rows.filter((row) => row.source_id !== alpha.id).map((row) => row.id).reverse();

    const nodes: RootOperationNode[] = [];
    const capture: KyselyPlugin = {
      transformQuery: ({ node }) => (nodes.push(node), node),
      transformResult: async ({ result }) => result,
    };
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await listDiagrams(env.db.withPlugin(capture), ws.workspaceId, { type: 'instance', q: 'beta', limit: 4, cursor });
      seen.push(...page.data.map((diagram) => diagram.id));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    expect(seen).toEqual(expected);

    const connection = sqliteConnectionOf(env.db);
    if (!connection) return;
    const runReads = nodes
      .map((node, i) => env.db.getExecutor().compileQuery(node, { queryId: `q${i}` }))
      .filter((query) => /from "runs"/.test(query.sql));
    expect(runReads.length).toBeGreaterThan(0);
    for (const { sql, parameters } of runReads) {
      const plan = (connection.prepare(`explain query plan ${sql}`).all(...(parameters as unknown[])) as { detail: string }[]).map((row) => row.detail);
      expect(plan, sql).toEqual([expect.stringMatching(/^SEARCH runs USING INDEX runs_source \(workspace_id=\? AND source_id=\?( AND id<\?)?\)$/)]);
    }
  });
});
