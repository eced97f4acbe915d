import { sql, type RawBuilder } from 'kysely';
import type { DbOrTx } from '../../storage/database.js';
import { dialectOfDb } from '../../storage/dialect.js';
import { uuidv7 } from '../../lib/ids.js';
import { newestFirstPage, type Page } from '../../lib/cursor.js';
import { parseJson } from '../../lib/json.js';
import { nameContains } from '../../lib/like.js';

/** What the API shows of a diagram (the spec's metadata). */
export interface DiagramSummary {
  id: string;
  type: 'blueprint' | 'instance';
  name: string;
  sourceId?: string;
  version: number;
  tags: string[];
  createdAt: string;
  updatedAt: string;
}

type DiagramRow = {
  id: string;
  type: 'blueprint' | 'instance';
  name: string;
  source_id: string | null;
  version: number;
  tags: string;
  created_at: string;
  updated_at: string;
};

export function toDiagramSummary(row: DiagramRow): DiagramSummary {
  return {
    id: row.id,
    type: row.type,
    name: row.name,
    ...(row.type === 'instance' && row.source_id ? { sourceId: row.source_id } : {}),
    version: row.version,
    tags: parseJson<string[]>(row.tags, []),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export interface ImportableBlueprint {
  name: string;
  tags: string[];
}

/**
 * Imports a validated blueprint. A blueprint of the same name in the workspace gets a new
 * version (runs in flight keep the version they were copied from); otherwise a new one is made.
 * Runs in a transaction (its own when given none).
 *
 * Imports of one name at the same time (several admin shells on one PostgreSQL database) take
 * turns: each would otherwise find no blueprint of that name and make one, or take the same next
 * version and fail on the version's key. The first holds a lock on the name until its
 * transaction ends; the next then finds its rows. SQLite's write transactions take turns anyway.
 */
export async function importBlueprint(
  db: DbOrTx,
  workspaceId: string,
  blueprint: ImportableBlueprint,
  at: string,
): Promise<{ id: string; name: string; version: number }> {
  if (!db.isTransaction) return db.transaction().execute((tx) => importBlueprint(tx, workspaceId, blueprint, at));
  if (dialectOfDb(db) === 'postgres') {
    await sql`select pg_advisory_xact_lock(hashtextextended(${`carepath blueprint ${workspaceId} ${blueprint.name}`}, 0))`.execute(db);
  }
  const existing = await db
    .selectFrom('diagrams')
    .select(['id', 'version'])
    .where('workspace_id', '=', workspaceId)
    .where('type', '=', 'blueprint')
    .where('name', '=', blueprint.name)
    .executeTakeFirst();
  const graph = JSON.stringify(blueprint);
  if (existing) {
    const version = existing.version + 1;
    await db.insertInto('blueprint_versions').values({ blueprint_id: existing.id, version, graph, created_at: at }).execute();
    await db
      .updateTable('diagrams')
      .set({ version, tags: JSON.stringify(blueprint.tags), updated_at: at })
      .where('id', '=', existing.id)
      .execute();
    return { id: existing.id, name: blueprint.name, version };
  }
  const id = uuidv7();
  await db
    .insertInto('diagrams')
    .values({
      id,
      workspace_id: workspaceId,
      type: 'blueprint',
      name: blueprint.name,
      source_id: null,
      version: 1,
      tags: JSON.stringify(blueprint.tags),
      created_at: at,
      updated_at: at,
    })
    .execute();
  await db.insertInto('blueprint_versions').values({ blueprint_id: id, version: 1, graph, created_at: at }).execute();
  return { id, name: blueprint.name, version: 1 };
}

export async function findDiagram(db: DbOrTx, workspaceId: string, id: string): Promise<DiagramSummary | null> {
  const row = await db
    .selectFrom('diagrams')
    .select(['id', 'type', 'name', 'source_id', 'version', 'tags', 'created_at', 'updated_at'])
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (row) return toDiagramSummary(row);
  const run = await db
    .selectFrom('runs')
    .select(INSTANCE_COLUMNS)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return run ? toDiagramSummary(run) : null;
}

/**
 * A run's instance is the run itself: the run row names the blueprint and the immutable
 * version it was copied from (blueprint_versions), which is the frozen copy. Reading instances
 * from the runs table saves a second row and three index entries per run on the fire path.
 */
const INSTANCE_COLUMNS = [
  'id',
  sql<'instance'>`'instance'`.as('type'),
  'name',
  'source_id',
  'source_version as version',
  sql<string>`'[]'`.as('tags'),
  'created_at',
  'updated_at',
] as const;

export async function findBlueprint(db: DbOrTx, workspaceId: string, id: string) {
  return db
    .selectFrom('diagrams')
    .select(['id', 'name', 'version', 'tags'])
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('type', '=', 'blueprint')
    .executeTakeFirst();
}

/** The frozen graph of one blueprint version (an instance reads the version it was copied from). */
export async function loadBlueprintGraph(db: DbOrTx, blueprintId: string, version: number): Promise<unknown | null> {
  const row = await db
    .selectFrom('blueprint_versions')
    .select('graph')
    .where('blueprint_id', '=', blueprintId)
    .where('version', '=', version)
    .executeTakeFirst();
  return row ? JSON.parse(row.graph) : null;
}

export interface DiagramListQuery {
  type: 'blueprint' | 'instance';
  sourceId?: string;
  q?: string;
  limit: number;
  cursor?: string;
}

/** Past this many blueprints matching a name search, instances are matched by their own names. */
const MAX_SOURCES_BY_NAME = 500;

/**
 * The blueprints of the workspace whose name contains `q`, or 'many'. An instance's name is its
 * blueprint's (a run is named as the blueprint it was copied from, and a blueprint keeps its name:
 * importing the same name makes a new version), so a name search over instances is a search over
 * blueprints, then their runs through `runs_source`: matched on the runs' own names, it read every
 * run of the workspace (1.8 s at a million runs on PostgreSQL, 10 s on SQLite; a scale review).
 */
async function blueprintsNamed(db: DbOrTx, workspaceId: string, q: string): Promise<string[] | 'many'> {
  const rows = await db
    .selectFrom('diagrams')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('type', '=', 'blueprint')
    .where(nameContains('name', q, dialectOfDb(db)))
    .limit(MAX_SOURCES_BY_NAME + 1)
    .execute();
  return rows.length > MAX_SOURCES_BY_NAME ? 'many' : rows.map((row) => row.id);
}

/** A read that a keyset pages on (`newestFirstPage`). */
interface KeysetSelect<Row extends { id: string }> {
  where(lhs: RawBuilder<string>, op: '<', rhs: string): KeysetSelect<Row>;
  orderBy(ref: RawBuilder<string>, direction: 'desc'): KeysetSelect<Row>;
  limit(n: number): KeysetSelect<Row>;
  execute(): Promise<Row[]>;
}

/**
 * Several newest-first reads as one: each read pages its own index range (a blueprint's runs
 * through `runs_source`), and the page is the newest of their rows. On SQLite `source_id in (…)
 * order by id desc` walked the workspace's runs through `runs_list` rather than sort, checking
 * each run's blueprint: every run of the workspace when the blueprints named had none (110 ms
 * for two at 200,000 runs; a cost review). PostgreSQL plans the `in` from its statistics.
 */
function newestOfEach<Row extends { id: string }>(selects: KeysetSelect<Row>[], limit?: number): KeysetSelect<Row> {
  return {
    where: (lhs, op, rhs) => newestOfEach(selects.map((select) => select.where(lhs, op, rhs)), limit),
    orderBy: (ref, direction) => newestOfEach(selects.map((select) => select.orderBy(ref, direction)), limit),
    limit: (n) => newestOfEach(selects.map((select) => select.limit(n)), n),
    execute: async () => {
      const rows: Row[] = [];
      for (const select of selects) rows.push(...(await select.execute()));
      rows.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
      return limit === undefined ? rows : rows.slice(0, limit);
    },
  };
}

export async function listDiagrams(db: DbOrTx, workspaceId: string, query: DiagramListQuery): Promise<Page<DiagramSummary>> {
  if (query.type === 'instance') {
    let select = db.selectFrom('runs').select(INSTANCE_COLUMNS).where('workspace_id', '=', workspaceId);
    if (query.sourceId) select = select.where('source_id', '=', query.sourceId);
    if (query.q) {
      const sources = await blueprintsNamed(db, workspaceId, query.q);
      if (sources === 'many') select = select.where(nameContains('name', query.q, dialectOfDb(db)));
      else if (sources.length === 0) return { data: [], nextCursor: null };
      else if (sources.length > 1 && dialectOfDb(db) === 'sqlite') {
        const base = select;
        return newestFirstPage(newestOfEach(sources.map((source) => base.where('source_id', '=', source))), query, toDiagramSummary, 'instances');
      } else select = select.where('source_id', 'in', sources);
    }
    return newestFirstPage(select, query, toDiagramSummary, 'instances');
  }
  let select = db
    .selectFrom('diagrams')
    .select(['id', 'type', 'name', 'source_id', 'version', 'tags', 'created_at', 'updated_at'])
    .where('workspace_id', '=', workspaceId)
    .where('type', '=', 'blueprint');
  // Blueprints are copied from nothing: a sourceId filter matches none of them.
  if (query.sourceId) select = select.where('source_id', '=', query.sourceId);
  if (query.q) select = select.where(nameContains('name', query.q, dialectOfDb(db)));
  return newestFirstPage(select, query, toDiagramSummary, 'blueprints');
}
