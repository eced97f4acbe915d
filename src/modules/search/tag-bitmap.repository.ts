/**
 * Reading and folding the tag bitmaps of migration 0004 (`tag_bitmaps` plus the change log
 * `record_tag_changes` that triggers on `records` and `record_tags` append to).
 *
 * A reader takes the stored chunks and the changes not yet folded in ONE statement, so it sees one
 * snapshot: the compactor folds changes and deletes them in one transaction, so in any snapshot a
 * change is either in the chunks or in the log, never in both and never in neither. Changes are
 * applied in log order; each says whether the record carries the tag from then on, so applying
 * one twice does no harm.
 */
import { sql } from 'kysely';
import type { Db, DbOrTx, RecordTable } from '../../storage/database.js';
import { dialectOfDb } from '../../storage/dialect.js';
import { CHUNK_BITS, TagBitmap, decodeChunk, encodeChunk } from './tag-bitmap.js';

/** The pseudo-tag every record of its type carries (not a valid slug, so no real tag collides). */
export const EVERY_RECORD = '*';

type ResourceType = RecordTable['resource_type'];

interface BitmapOrChange {
  tag: string;
  chunk: number | null;
  bits: Uint8Array | null;
  seq: number | string | null;
  present: number | null;
  id: number | string | null;
}

/** The bitmap of each tag (and of `*` if asked) for one type in one workspace, as of now. */
export async function loadTagBitmaps(
  db: DbOrTx,
  workspaceId: string,
  resourceType: ResourceType,
  tags: readonly string[],
): Promise<Map<string, TagBitmap>> {
  const bitmaps = new Map(tags.map((tag) => [tag, new TagBitmap()]));
  if (tags.length === 0) return bitmaps;
  const tagList = sql.join([...bitmaps.keys()]);
  const { rows } = await sql<BitmapOrChange>`
    select tag, chunk, bits, null as seq, null as present, null as id
      from tag_bitmaps where workspace_id = ${workspaceId} and resource_type = ${resourceType} and tag in (${tagList})
    union all
    select tag, null, null, seq, present, id
      from record_tag_changes where workspace_id = ${workspaceId} and resource_type = ${resourceType} and tag in (${tagList})`.execute(db);
  const changes: BitmapOrChange[] = [];
  for (const row of rows) {
    if (row.bits !== null) bitmaps.get(row.tag)!.chunks.set(Number(row.chunk), decodeChunk(row.bits));
    else changes.push(row);
  }
  changes.sort((a, b) => Number(a.id) - Number(b.id));
  for (const change of changes) bitmaps.get(change.tag)!.set(Number(change.seq), change.present === 1);
  return bitmaps;
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

  const writes: { workspace_id: string; resource_type: ResourceType; tag: string; chunk: number; bits: Buffer }[] = [];
  const emptied: { tag: string; chunk: number }[] = [];
  for (const [tag, list] of group.byTag) {
    const bitmap = bitmaps.get(tag)!;
    const changedChunks = new Set<number>();
    for (const change of list) {
      const seq = Number(change.seq);
      bitmap.set(seq, change.present === 1);
      changedChunks.add(Math.floor(seq / CHUNK_BITS));
    }
    for (const chunk of changedChunks) {
      const words = bitmap.chunks.get(chunk);
      const bytes = words ? encodeChunk(words) : null;
      if (bytes) {
        const bits = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        writes.push({ workspace_id: group.workspaceId, resource_type: group.resourceType, tag, chunk, bits });
      } else emptied.push({ tag, chunk });
    }
  }
  for (let i = 0; i < writes.length; i += WRITE_BATCH) {
    await tx
      .insertInto('tag_bitmaps')
      .values(writes.slice(i, i + WRITE_BATCH))
      .onConflict((oc) =>
        oc.columns(['workspace_id', 'resource_type', 'tag', 'chunk']).doUpdateSet((eb) => ({ bits: eb.ref('excluded.bits') })),
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
