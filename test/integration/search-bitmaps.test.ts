/**
 * Search answers from tag bitmaps plus the change log not yet folded (modules/search). Here every
 * answer is checked against a plain SQL reading of records and record_tags, while tags change,
 * records come and go, and the log is folded at arbitrary moments, in arbitrary batch sizes.
 */
import { expect, it } from 'vitest';
import { Migrator, sql } from 'kysely';
import { describeEachStore, type TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { changeTags, insertRecords, type RecordInput } from '../../src/modules/records/record.repository.js';
import { foldTagChanges } from '../../src/modules/search/tag-bitmap.repository.js';
import { tagBitmapFolderService } from '../../src/modules/search/tag-bitmap-folder.service.js';
import type { SearchOrder, TagFilter } from '../../src/modules/search/search.schemas.js';
import { migrations } from '../../src/storage/migrations/index.js';
import { openStore } from '../../src/storage/connect.js';
import { freshStore } from '../helpers/stores.js';

/** A small deterministic generator, so a failure can be replayed. */
function random(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

const TAGS = ['common', 'half', 'some', 'rare'];
const ORDERS: { order: SearchOrder; column: 'name' | 'created_at' | 'updated_at' | 'ext_id' }[] = [
  { order: 'name', column: 'name' },
  { order: 'extId', column: 'ext_id' },
  { order: 'createdAt', column: 'created_at' },
  { order: 'updatedAt', column: 'updated_at' },
];

function tagsFor(next: () => number, index: number): string[] {
  const tags: string[] = [];
  if (next() < 0.8) tags.push('common');
  if (next() < 0.5) tags.push('half');
  if (next() < 0.2) tags.push('some');
  if (next() < 0.02) tags.push('rare');
  // Only records whose names sort last carry `late`: a walk in name order needs several batches.
  if (index >= 260) tags.push('late');
  return tags;
}

function patients(next: () => number, from: number, count: number): RecordInput[] {
  return Array.from({ length: count }, (_, i) => {
    const index = from + i;
    return {
      resourceType: 'Patient',
      extId: `p-${String((index * 7_919) % 1_000).padStart(4, '0')}-${index}`,
      name: `Patient ${String(index).padStart(5, '0')}`,
      tags: tagsFor(next, index),
    };
  });
}

/** The plain reading: records of the type, EXISTS / NOT EXISTS over record_tags per filter. */
function matchingRecords(db: TestEnv['db'], workspaceId: string, criteria: { resourceType: 'Patient'; filters: TagFilter[] }) {
  let select = db
    .selectFrom('records')
    .where('records.workspace_id', '=', workspaceId)
    .where('records.resource_type', '=', criteria.resourceType);
  for (const filter of criteria.filters) {
    select = select.where((eb) => {
      const tagged = eb.exists(
        eb
          .selectFrom('record_tags')
          .select(eb.lit(1).as('one'))
          .whereRef('record_tags.record_id', '=', 'records.id')
          .where('record_tags.tag', '=', filter.tag),
      );
      return filter.op === 'with' ? tagged : eb.not(tagged);
    });
  }
  return select;
}

async function oracleCount(env: TestEnv, ws: TestWorkspace, filters: TagFilter[]): Promise<number> {
  const row = await matchingRecords(env.db, ws.workspaceId, { resourceType: 'Patient', filters })
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

async function oraclePage(
  env: TestEnv,
  ws: TestWorkspace,
  filters: TagFilter[],
  column: string,
  direction: 'asc' | 'desc',
  limit: number,
  offset: number,
): Promise<string[]> {
  const rows = await matchingRecords(env.db, ws.workspaceId, { resourceType: 'Patient', filters })
    .select('records.id')
    .orderBy(sql.ref(`records.${column}`), direction)
    .orderBy('records.id', direction)
    .limit(limit)
    .offset(offset)
    .execute();
  return rows.map((row) => row.id);
}

function randomFilters(next: () => number): TagFilter[] {
  const all = [...TAGS, 'late', 'nobody-has-this'];
  const count = Math.floor(next() * 4);
  return Array.from({ length: count }, () => ({
    op: next() < 0.65 ? ('with' as const) : ('without' as const),
    tag: all[Math.floor(next() * all.length)],
  }));
}

async function expectSearchAgreesWithSql(env: TestEnv, ws: TestWorkspace, next: () => number, rounds: number) {
  for (let round = 0; round < rounds; round++) {
    const filters = randomFilters(next);
    const { order, column } = ORDERS[Math.floor(next() * ORDERS.length)];
    const direction = next() < 0.5 ? 'asc' : 'desc';
    const limit = 1 + Math.floor(next() * 60);
    const offset = next() < 0.5 ? 0 : Math.floor(next() * 200);
    const expectedTotal = await oracleCount(env, ws, filters);
    const count = await ws.call('POST', '/v1/search/count', { body: { resourceType: 'Patient', filters } });
    expect(count.json(), JSON.stringify(filters)).toEqual({ total: expectedTotal });
    const res = await ws.call('POST', '/v1/search', {
      body: { resourceType: 'Patient', filters, order, orderDirection: direction, limit, offset },
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as { total: number; results: { id: string }[] };
    const context = JSON.stringify({ filters, order, direction, limit, offset });
    expect(body.total, context).toBe(expectedTotal);
    expect(
      body.results.map((hit) => hit.id),
      context,
    ).toEqual(await oraclePage(env, ws, filters, column, direction, limit, offset));
  }
}

async function logSize(env: TestEnv): Promise<number> {
  const row = await env.db
    .selectFrom('record_tag_changes')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

async function foldAll(env: TestEnv, batch = 20_000): Promise<void> {
  while ((await foldTagChanges(env.db, batch)) > 0);
}

describeEachStore('search from tag bitmaps', (env) => {
  it('answers exactly as plain SQL while tags change, records come and go and the log is folded at random', async () => {
    const next = random(20_261_122);
    const ws = await env.workspace();
    // Another workspace with the same tags: never counted in the first.
    const other = await env.workspace();
    await insertRecords(env.db, other.workspaceId, patients(next, 0, 120), new Date().toISOString());

    const ids: string[] = [];
    let created = 0;
    for (let phase = 0; phase < 6; phase++) {
      const at = new Date(Date.UTC(2026, 0, 1, 0, phase)).toISOString();
      ids.push(...(await insertRecords(env.db, ws.workspaceId, patients(next, created, 60), at)));
      created += 60;
      // Change tags of some records, and remove a few records as ingestion does (tags first).
      for (let i = 0; i < 25; i++) {
        const id = ids[Math.floor(next() * ids.length)];
        const add = TAGS.filter(() => next() < 0.3);
        const remove = TAGS.filter((tag) => !add.includes(tag) && next() < 0.3);
        await changeTags(env.db, ws.workspaceId, id, add, remove, at);
      }
      for (let i = 0; i < 4; i++) {
        const [id] = ids.splice(Math.floor(next() * ids.length), 1);
        await env.db.deleteFrom('record_tags').where('record_id', '=', id).execute();
        await env.db.deleteFrom('records').where('id', '=', id).execute();
      }
      // Fold some of the log (sometimes none, sometimes all) before checking.
      const folds = Math.floor(next() * 3);
      for (let i = 0; i < folds; i++) await foldTagChanges(env.db, 1 + Math.floor(next() * 400));
      await expectSearchAgreesWithSql(env, ws, next, 12);
    }

    await foldAll(env, 97);
    expect(await logSize(env)).toBe(0);
    await expectSearchAgreesWithSql(env, ws, next, 20);
    // Matches bunched at one end of the order: the walk reads several batches, and every batch
    // boundary falls among matching records.
    for (const [direction, offset, limit] of [
      ['asc', 0, 60],
      ['asc', 45, 60],
      ['desc', 130, 40],
      ['asc', 299, 1],
    ] as const) {
      for (const filters of [[{ op: 'with', tag: 'late' }], [{ op: 'without', tag: 'late' }]] as TagFilter[][]) {
        const res = await ws.call('POST', '/v1/search', {
          body: { resourceType: 'Patient', filters, order: 'name', orderDirection: direction, limit, offset },
        });
        expect(
          res.json().results.map((hit: { id: string }) => hit.id),
          JSON.stringify({ filters, direction, offset, limit }),
        ).toEqual(await oraclePage(env, ws, filters, 'name', direction, limit, offset));
      }
    }
    const otherCount = await other.call('POST', '/v1/search/count', { body: { resourceType: 'Patient' } });
    expect(otherCount.json()).toEqual({ total: 120 });
  });

  it('a search asked again reuses its matches only while every tag it reads is unchanged', async () => {
    const ws = await env.workspace();
    const at = new Date().toISOString();
    const ids = await insertRecords(
      env.db,
      ws.workspaceId,
      Array.from({ length: 40 }, (_, i) => ({ resourceType: 'Patient' as const, extId: `m-${i}`, name: `M ${i}`, tags: i % 2 ? ['odd'] : [] })),
      at,
    );
    await foldAll(env);
    const body = { resourceType: 'Patient', filters: [{ op: 'with', tag: 'odd' }, { op: 'without', tag: 'gone' }] };
    const count = async () => (await ws.call('POST', '/v1/search/count', { body })).json().total;
    expect(await count()).toBe(20);
    expect(await count()).toBe(20);
    // A change still in the log, then folded (a new version of the chunk), then a record removed.
    await changeTags(env.db, ws.workspaceId, ids[0], ['odd'], [], at);
    expect(await count()).toBe(21);
    await foldAll(env);
    expect(await count()).toBe(21);
    await changeTags(env.db, ws.workspaceId, ids[1], ['gone'], [], at);
    expect(await count()).toBe(20);
    await foldAll(env);
    expect(await count()).toBe(20);
    await env.db.deleteFrom('record_tags').where('record_id', '=', ids[3]).execute();
    await env.db.deleteFrom('records').where('id', '=', ids[3]).execute();
    expect(await count()).toBe(19);
    // The same filters in another order are the same search; the page agrees with the count.
    const reordered = { ...body, filters: [...body.filters].reverse(), limit: 100 };
    const page = (await ws.call('POST', '/v1/search', { body: reordered })).json();
    expect(page.total).toBe(19);
    expect(page.results).toHaveLength(19);
  });

  it('counts records of one type only, and Pathway records follow their runs', async () => {
    const ws = await env.workspace();
    const at = new Date().toISOString();
    await insertRecords(env.db, ws.workspaceId, [{ resourceType: 'Practitioner', extId: 'dr-1', name: 'Dr One', tags: ['common'] }], at);
    await insertRecords(env.db, ws.workspaceId, [{ resourceType: 'Patient', extId: 'p-1', name: 'One', tags: ['common'] }], at);
    const count = async (resourceType: string, filters: TagFilter[] = []) =>
      (await ws.call('POST', '/v1/search/count', { body: { resourceType, filters } })).json().total;
    expect(await count('Practitioner')).toBe(1);
    expect(await count('Patient', [{ op: 'with', tag: 'common' }])).toBe(1);
    await foldAll(env);
    expect(await count('Practitioner', [{ op: 'with', tag: 'common' }])).toBe(1);
    expect(await count('Pathway')).toBe(0);
  });

  it('folding empties the log, stores each chunk once, and drops a chunk whose last record left it', async () => {
    const ws = await env.workspace();
    const at = new Date().toISOString();
    const [id] = await insertRecords(env.db, ws.workspaceId, [{ resourceType: 'Patient', extId: 'solo', name: 'Solo', tags: ['alone'] }], at);
    await foldAll(env);
    const stored = () =>
      env.db.selectFrom('tag_bitmaps').select(['tag', 'chunk']).where('workspace_id', '=', ws.workspaceId).orderBy('tag').execute();
    expect((await stored()).map((row) => row.tag)).toEqual(['*', 'alone']);
    await changeTags(env.db, ws.workspaceId, id, [], ['alone'], at);
    await foldAll(env);
    expect((await stored()).map((row) => row.tag)).toEqual(['*']);
    expect(await logSize(env)).toBe(0);
  });
});

describeEachStore('tag bitmaps of records stored before they existed', (env) => {
  it('migration 0004 logs every existing record and tag, and search then counts them', async () => {
    const store = await freshStore(env.kind);
    const opened = openStore(store.databaseUrl, store.storeOptions);
    const db = opened.db;
    try {
      const migrationTableSchema = store.storeOptions.schema;
      const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations }, migrationTableSchema });
      expect((await migrator.migrateTo('0003_ingestion')).error).toBeUndefined();
      const at = '2026-01-01T00:00:00.000Z';
      for (let i = 0; i < 30; i++) {
        const id = `00000000-0000-7000-8000-${String(i).padStart(12, '0')}`;
        await sql`insert into records (id, workspace_id, resource_type, ext_id, name, created_at, updated_at)
          values (${id}, 'ws-old', 'Patient', ${`p-${i}`}, ${`Old ${i}`}, ${at}, ${at})`.execute(db);
        if (i % 3 === 0) await sql`insert into record_tags (record_id, workspace_id, tag) values (${id}, 'ws-old', 'third')`.execute(db);
      }
      expect((await migrator.migrateToLatest()).error).toBeUndefined();
      const { countRecords } = await import('../../src/modules/search/search.repository.js');
      const third = [{ op: 'with' as const, tag: 'third' }];
      expect(await countRecords(db, 'ws-old', { resourceType: 'Patient', filters: third })).toBe(10);
      while ((await foldTagChanges(db, 7)) > 0);
      expect(await countRecords(db, 'ws-old', { resourceType: 'Patient', filters: third })).toBe(10);
      expect(await countRecords(db, 'ws-old', { resourceType: 'Patient', filters: [] })).toBe(30);
      // The records kept their ids and got positions in their old order.
      const rows = await db.selectFrom('records').select(['seq', 'id']).orderBy('seq').execute();
      expect(rows.map((row) => row.id)).toEqual([...rows.map((row) => row.id)].sort());
    } finally {
      // close(), not db.destroy(): on SQLite it also stops the checkpointer thread, which would
      // otherwise still hold the file while its folder is removed.
      await opened.close();
      await store.dispose();
    }
  });
});

describeEachStore('the tag change log folder', (env) => {
  it('folds the log in the background, and on PostgreSQL vacuums it once a large fold has emptied it', async () => {
    const ws = await env.workspace();
    const records = Array.from({ length: 120 }, (_, n) => ({ resourceType: 'Patient' as const, extId: `fold-${n}`, name: `Fold ${n}`, tags: ['a', 'b'] }));
    await insertRecords(env.db, ws.workspaceId, records, new Date().toISOString());
    const logged = async () => Number((await env.db.selectFrom('record_tag_changes').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    expect(await logged()).toBeGreaterThanOrEqual(360);
    const lastVacuum = async () =>
      (await sql<{ at: string | null }>`select last_vacuum as at from pg_stat_user_tables where relname = 'record_tag_changes' and schemaname = current_schema()`.execute(env.db)).rows[0]?.at ?? null;
    const before = env.kind === 'postgres' ? await lastVacuum() : null;
    const folder = await tagBitmapFolderService({ batch: 100, pollMs: 20, vacuumAfter: 300 }).start(env.container);
    try {
      for (let waited = 0; (await logged()) > 0 && waited < 10_000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await logged()).toBe(0);
      if (env.kind === 'postgres') {
        let after = before;
        for (let waited = 0; after === before && waited < 10_000; waited += 100) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          after = await lastVacuum();
        }
        expect(after).not.toBe(before);
      }
    } finally {
      await folder.stop();
    }
  });
});
