/**
 * Reading and folding the tag bitmaps of migration 0004 (`tag_bitmaps` plus the change log
 * `record_tag_changes` that triggers on `records` and `record_tags` append to).
 *
 * A reader takes the stored chunks and the changes not yet folded in one snapshot (ONE statement
 * on PostgreSQL and inside a transaction; one read transaction on SQLite, bitmap-read-sqlite.ts):
 * the compactor folds changes and deletes them in one transaction, so in any snapshot a
 * change is either in the chunks or in the log, never in both and never in neither. Changes are
 * applied in log order; each says whether the record carries the tag from then on, so applying
 * one twice does no harm.
 */
import { sql } from 'kysely';
import type { Db, DbOrTx, RecordTable } from '../../storage/database.js';
import { dialectOfDb } from '../../storage/dialect.js';
import { runPostgres, type PostgresStatement } from '../../storage/postgres-statement.js';
import { CHUNK_BITS, TagBitmap, decodeChunk, encodeChunk } from './tag-bitmap.js';
import { ChunkCache } from './chunk-cache.js';
import { perStore } from '../../storage/per-store.js';
import { sqliteBitmapReader, type BitmapOrChange } from './bitmap-read-sqlite.js';

/** The pseudo-tag every record of its type carries (not a valid slug, so no real tag collides). */
export const EVERY_RECORD = '*';

type ResourceType = RecordTable['resource_type'];

/** One chunk cache per store. */
const cacheOf = perStore(() => new ChunkCache());

/** The bitmaps of one read, and what they were made of. */
export interface TagBitmapsRead {
  bitmaps: Map<string, TagBitmap>;
  /**
   * When the log held no change for these tags: every chunk stored for them, as
   * `tag|chunk|version` (storedChunkKey). A later snapshot that holds exactly these chunks and
   * no logged change for the tags has these very bitmaps: a version is the id of the last change
   * folded into its chunk, and ids are never used twice. Null when changes were applied.
   */
  storedChunks: string[] | null;
}

/**
 * The bitmap of each tag (and of `*` if asked) for one type in one workspace, as of now. The
 * store sends the bits only of chunks this process does not hold at their current version.
 */
export async function loadTagBitmaps(
  db: DbOrTx,
  workspaceId: string,
  resourceType: ResourceType,
  tags: readonly string[],
): Promise<TagBitmapsRead> {
  const bitmaps = new Map(tags.map((tag) => [tag, new TagBitmap()]));
  if (tags.length === 0) return { bitmaps, storedChunks: [] };
  const cache = cacheOf(db);
  const cached = new Map([...bitmaps.keys()].map((tag) => [tag, cache.tag(workspaceId, resourceType, tag)]));
  // What this read holds, fixed before it asks: other reads may change the cache meanwhile.
  const heldWords = new Map<string, Uint32Array>();
  for (const [tag, chunks] of cached) for (const [chunk, { version, words }] of chunks) heldWords.set(storedChunkKey(tag, chunk, version), words);
  const rows = await readChunksAndChanges(db, workspaceId, resourceType, [...bitmaps.keys()], heldWords);

  const changes: BitmapOrChange[] = [];
  const storedChunks: string[] = [];
  for (const row of rows) {
    if (row.chunk === null) {
      changes.push(row);
      continue;
    }
    const chunk = Number(row.chunk);
    storedChunks.push(storedChunkKey(row.tag, chunk, Number(row.version)));
    const chunks = cached.get(row.tag)!;
    let words: Uint32Array;
    if (row.bits === null) words = heldWords.get(storedChunkKey(row.tag, chunk, Number(row.version)))!;
    else {
      words = decodeChunk(row.bits);
      chunks.set(chunk, { version: Number(row.version), words });
    }
    bitmaps.get(row.tag)!.chunks.set(chunk, words);
  }
  // Chunks the store no longer has (emptied by a fold) leave the cache.
  for (const [tag, chunks] of cached) for (const chunk of chunks.keys()) if (!bitmaps.get(tag)!.chunks.has(chunk)) chunks.delete(chunk);
  cache.settle();

  if (changes.length === 0) return { bitmaps, storedChunks };
  // Changes not folded yet, in log order, on copies: the cached words are shared.
  changes.sort((a, b) => Number(a.id) - Number(b.id));
  const copied = new Set<Uint32Array>();
  for (const change of changes) {
    const bitmap = bitmaps.get(change.tag)!;
    const seq = Number(change.seq);
    const chunk = Math.floor(seq / CHUNK_BITS);
    const words = bitmap.chunks.get(chunk);
    if (words && !copied.has(words)) {
      const copy = words.slice();
      bitmap.chunks.set(chunk, copy);
      copied.add(copy);
    }
    bitmap.set(seq, change.present === 1);
    const created = bitmap.chunks.get(chunk);
    if (created) copied.add(created);
  }
  return { bitmaps, storedChunks: null };
}

/**
 * PostgreSQL: one text whatever the number of tags, sent to the pool as it is (postgres-statement.ts),
 * which saves Kysely building the query on every search (about 0.3 ms). Unnamed, so planned on
 * every run: a generic plan made while the change log was empty scans the log, and would go on
 * scanning it as it grows until the next ANALYZE. $1 workspace, $2 type, $3 tags, $4 held chunks.
 */
const READ_POSTGRES: PostgresStatement = {
  text: `
    select tag, chunk, version, case when (tag || '|' || chunk::text || '|' || version::text) = any($4::text[]) then null else bits end as bits, null as seq, null as present, null as id
      from tag_bitmaps where workspace_id = $1 and resource_type = $2 and tag = any($3::text[])
    union all
    select tag, null, null, null, seq, present, id
      from record_tag_changes where workspace_id = $1 and resource_type = $2 and tag = any($3::text[])`,
};

/** The stored chunks (bits only where `held` lacks their version) and the changes not folded yet, in one snapshot. */
async function readChunksAndChanges(
  db: DbOrTx,
  workspaceId: string,
  resourceType: ResourceType,
  tags: string[],
  held: Map<string, Uint32Array>,
): Promise<BitmapOrChange[]> {
  if (dialectOfDb(db) === 'postgres') return runPostgres<BitmapOrChange>(db, READ_POSTGRES, [workspaceId, resourceType, tags, [...held.keys()]]);
  const reader = sqliteBitmapReader(db);
  if (reader) return reader(workspaceId, resourceType, tags, (tag, chunk, version) => held.has(storedChunkKey(tag, chunk, version)));
  return readSqlite(db, workspaceId, resourceType, tags, [...held.keys()]);
}

/** SQLite inside a transaction (a search trigger's tick): the same read as one statement of its turn. */
async function readSqlite(db: DbOrTx, workspaceId: string, resourceType: ResourceType, tags: string[], held: string[]): Promise<BitmapOrChange[]> {
  const tagList = sql.join(tags);
  const { rows } = await sql<BitmapOrChange>`
    select tag, chunk, version, case when (tag || '|' || chunk || '|' || version) in (select value from json_each(${JSON.stringify(held)})) then null else bits end as bits, null as seq, null as present, null as id
      from tag_bitmaps where workspace_id = ${workspaceId} and resource_type = ${resourceType} and tag in (${tagList})
    union all
    select tag, null, null, null, seq, present, id
      from record_tag_changes where workspace_id = ${workspaceId} and resource_type = ${resourceType} and tag in (${tagList})`.execute(db);
  return rows;
}

/** A stored chunk at one version, as the store writes it in SQL: `tag || '|' || chunk || '|' || version`. */
export function storedChunkKey(tag: string, chunk: number, version: number): string {
  return `${tag}|${chunk}|${version}`;
}

/** A key no other part of the service uses for a PostgreSQL advisory lock: one folder at a time. */
const FOLD_LOCK = 0x7467_6266; // "tgbf"

interface ChangeRow {
  id: number | string;
  workspace_id: string;
  resource_type: ResourceType;
  tag: string;
  seq: number | string;
  present: number;
}

/**
 * Folds up to `limit` of the oldest logged changes into the stored chunks and deletes them, in
 * one transaction. Returns how many it folded (0 when the log is empty or, on PostgreSQL, when
 * another process is folding right now).
 */
export async function foldTagChanges(db: Db, limit = 20_000): Promise<number> {
  const postgres = dialectOfDb(db) === 'postgres';
  return db.transaction().execute(async (tx) => {
    if (postgres) {
      const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_xact_lock(${FOLD_LOCK}) as locked`.execute(tx);
      if (!rows[0]?.locked) return 0;
    }
    // Read and delete the very same rows in one statement: a change committed meanwhile by
    // another transaction is neither folded nor deleted, and waits for the next round.
    const { rows: changes } = await sql<ChangeRow>`
      delete from record_tag_changes
      where id in (select id from record_tag_changes order by id limit ${limit})
      returning id, workspace_id, resource_type, tag, seq, present`.execute(tx);
    if (changes.length === 0) return 0;
    changes.sort((a, b) => Number(a.id) - Number(b.id));
    for (const group of groupByBitmap(changes)) await foldGroup(tx, group);
    return changes.length;
  });
}

interface BitmapGroup {
  workspaceId: string;
  resourceType: ResourceType;
  /** tag → its changes in log order */
  byTag: Map<string, ChangeRow[]>;
}

function groupByBitmap(changes: ChangeRow[]): BitmapGroup[] {
  const groups = new Map<string, BitmapGroup>();
  for (const change of changes) {
    const key = `${change.workspace_id}\u0000${change.resource_type}`;
    let group = groups.get(key);
    if (!group) {
      group = { workspaceId: change.workspace_id, resourceType: change.resource_type, byTag: new Map() };
      groups.set(key, group);
    }
    const list = group.byTag.get(change.tag);
    if (list) list.push(change);
    else group.byTag.set(change.tag, [change]);
  }
  return [...groups.values()];
}

/** Stored chunks written per statement: at most 8 KiB each. */
const WRITE_BATCH = 100;

async function foldGroup(tx: DbOrTx, group: BitmapGroup): Promise<void> {
  const tags = [...group.byTag.keys()];
  const touched = new Set<number>();
  for (const list of group.byTag.values()) for (const change of list) touched.add(Math.floor(Number(change.seq) / CHUNK_BITS));
  const stored = await tx
    .selectFrom('tag_bitmaps')
    .select(['tag', 'chunk', 'bits'])
    .where('workspace_id', '=', group.workspaceId)
    .where('resource_type', '=', group.resourceType)
    .where('tag', 'in', tags)
    .where('chunk', 'in', [...touched])
    .execute();
  const bitmaps = new Map(tags.map((tag) => [tag, new TagBitmap()]));
  for (const row of stored) bitmaps.get(row.tag)!.chunks.set(row.chunk, decodeChunk(row.bits));

  const writes: { workspace_id: string; resource_type: ResourceType; tag: string; chunk: number; bits: Buffer; version: number }[] = [];
  const emptied: { tag: string; chunk: number }[] = [];
  for (const [tag, list] of group.byTag) {
    const bitmap = bitmaps.get(tag)!;
    // chunk → the id of the last change folded into it: the chunk's new version
    const changedChunks = new Map<number, number>();
    for (const change of list) {
      const seq = Number(change.seq);
      bitmap.set(seq, change.present === 1);
      changedChunks.set(Math.floor(seq / CHUNK_BITS), Number(change.id));
    }
    for (const [chunk, version] of changedChunks) {
      const words = bitmap.chunks.get(chunk);
      const bytes = words ? encodeChunk(words) : null;
      if (bytes) {
        const bits = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        writes.push({ workspace_id: group.workspaceId, resource_type: group.resourceType, tag, chunk, bits, version });
      } else emptied.push({ tag, chunk });
    }
  }
  for (let i = 0; i < writes.length; i += WRITE_BATCH) {
    await tx
      .insertInto('tag_bitmaps')
      .values(writes.slice(i, i + WRITE_BATCH))
      .onConflict((oc) =>
        oc
          .columns(['workspace_id', 'resource_type', 'tag', 'chunk'])
          .doUpdateSet((eb) => ({ bits: eb.ref('excluded.bits'), version: eb.ref('excluded.version') })),
      )
      .execute();
  }
  for (const { tag, chunk } of emptied) {
    await tx
      .deleteFrom('tag_bitmaps')
      .where('workspace_id', '=', group.workspaceId)
      .where('resource_type', '=', group.resourceType)
      .where('tag', '=', tag)
      .where('chunk', '=', chunk)
      .execute();
  }
}
