/**
 * The reads of search (DESIGN §8): records of one type in one workspace, narrowed by tag filters
 * (ANDed), all on the server.
 *
 * Which records match is answered by the tag bitmaps (tag-bitmap.ts): the bitmap of every record
 * of the type, ANDed with each `with` tag's and AND-NOTed with each `without` tag's. That gives the
 * exact `total` in a few thousand word operations, however many records carry the tags. A page is
 * then read in the requested order in one of two ways, whichever reads fewer rows:
 * - walk: read the order index from the start, keep the records whose position is in the match
 *   bitmap, stop once `offset + limit` are found (cheap when matches are common);
 * - fetch: read exactly the matching records and let the store sort them (cheap when they are rare).
 * Both let the store compare the sort keys, so paging follows the store's collation either way.
 * On PostgreSQL the walk runs in the store, in the same statement that reads the hits and, when
 * asked, writes the search's audit row (walk-in-store.ts).
 */
import { sql } from 'kysely';
import type { Db, DbOrTx } from '../../storage/database.js';
import { weakMemo } from '../../lib/weak-memo.js';
import { checkedOnlyOnSqlite, dialectOfDb } from '../../storage/dialect.js';
import { perStore } from '../../storage/per-store.js';
import { intersect, type TagBitmap } from './tag-bitmap.js';
import { MatchCache, matchInputs } from './match-cache.js';
import { hitOf } from './hit-rows.js';
import { EVERY_RECORD, loadTagBitmaps } from './tag-bitmap.repository.js';
import { matchWindow, walkInStore, type OrderColumn } from './walk-in-store.js';
import { sqliteWalkReader, type WalkAfter } from './walk-sqlite.js';
import type { AuditRowAroundIds } from './search-audit.js';
import type { ResourceType, SearchHit, SearchOrder, TagFilter } from './search.schemas.js';

export interface RecordCriteria {
  resourceType: ResourceType;
  filters: readonly TagFilter[];
}

export interface RecordPageQuery {
  order: SearchOrder;
  direction: 'asc' | 'desc';
  limit: number;
  offset: number;
}

/** The records a search matches: their positions, how many, and how many records of the type exist. */
export interface Matches {
  resourceType: ResourceType;
  positions: TagBitmap;
  total: number;
  everyRecord: number;
}

const ORDER_COLUMN = {
  name: 'name',
  createdAt: 'created_at',
  updatedAt: 'updated_at',
  extId: 'ext_id',
} as const satisfies Record<SearchOrder, OrderColumn>;

/** One match cache per store. */
const matchCacheOf = perStore(() => new MatchCache());

/**
 * The matches of a search, as of one snapshot of the store. A search whose tags read exactly the
 * chunks an earlier one with the same filters read gets the earlier matches (match-cache.ts).
 */
export async function findMatches(db: DbOrTx, workspaceId: string, criteria: RecordCriteria): Promise<Matches> {
  const { withTags, withoutTags, key } = searchKey(workspaceId, criteria);
  const read = await loadTagBitmaps(db, workspaceId, criteria.resourceType, [EVERY_RECORD, ...withTags, ...withoutTags]);
  const every = read.bitmaps.get(EVERY_RECORD)!;
  const required = withTags.map((tag) => read.bitmaps.get(tag)!);
  const excluded = withoutTags.map((tag) => read.bitmaps.get(tag)!);

  const cache = matchCacheOf(db);
  const inputs = matchInputs([every, ...required, ...excluded]);
  let matches = cache.lookup(key, inputs);
  if (!matches) {
    const positions = intersect(every, required, excluded);
    matches = { positions, total: positions.cardinality(), everyRecord: every.cardinality(), storedChunks: read.storedChunks };
    cache.store(key, inputs, matches);
  } else if (matches.storedChunks === null && read.storedChunks !== null) {
    // The same bits, now known to come from stored chunks alone: a search asked again may take the short way.
    matches = { ...matches, storedChunks: read.storedChunks };
    cache.store(key, inputs, matches);
  }
  return { resourceType: criteria.resourceType, ...matches };
}

/** A search's tags, each once and sorted, and the key of its matches: the same filters in any order are one search. */
function searchKey(workspaceId: string, criteria: RecordCriteria) {
  const withTags = [...new Set(criteria.filters.filter((f) => f.op === 'with').map((f) => f.tag))].sort();
  const withoutTags = [...new Set(criteria.filters.filter((f) => f.op === 'without').map((f) => f.tag))].sort();
  const key = `${workspaceId}\u0000${criteria.resourceType}\u0000${withTags.join(' ')}\u0000${withoutTags.join(' ')}`;
  return { withTags, withoutTags, key };
}

/** The number of matching records. */
export async function countRecords(db: DbOrTx, workspaceId: string, criteria: RecordCriteria): Promise<number> {
  return (await findMatches(db, workspaceId, criteria)).total;
}

/** Walking reads index entries only; fetching reads whole rows: a walk of 8 entries costs about one fetch. */
const WALK_ROWS_PER_FETCHED_ROW = 8;
const WALK_BATCH_MIN = 64;
const WALK_BATCH_MAX = 4_096;

/** A page of hits, and whether the statement that read it also wrote the audit row it was given. */
export interface RecordPage {
  hits: SearchHit[];
  audited: boolean;
}

/**
 * PostgreSQL: the page of a search asked before, in ONE statement and no transaction, when the
 * store still holds what its matches were computed from. The statement checks that the tags'
 * stored chunks are those the matches came from and that no change to them is logged, and only
 * then walks and (when asked) writes the audit row, all in its one snapshot; otherwise it
 * returns nothing and this answers undefined: the caller reads the bitmaps and the page as
 * usual. Paging through a cohort or polling a dashboard asks the same search again and again;
 * this saves it the bitmap read and the transaction's BEGIN and COMMIT (three round trips).
 * Only a walked page is read this way (the common case: matches not rare).
 */
export async function findUnchangedPage(
  db: Db,
  workspaceId: string,
  criteria: RecordCriteria,
  query: RecordPageQuery,
  audit?: (total: number) => AuditRowAroundIds,
): Promise<{ total: number; hits: SearchHit[] } | undefined> {
  if (dialectOfDb(db) !== 'postgres') return undefined;
  const { withTags, withoutTags, key } = searchKey(workspaceId, criteria);
  const matches = matchCacheOf(db).latest(key);
  if (!matches?.storedChunks || query.offset >= matches.total || query.limit === 0) return undefined;
  if (walkCost(matches, query) > WALK_ROWS_PER_FETCHED_ROW * matches.total) return undefined;
  const window = matchWindowOf(matches.positions);
  if (!window) return undefined;
  const { direction, limit, offset } = query;
  const walk = { workspaceId, resourceType: criteria.resourceType, column: ORDER_COLUMN[query.order], direction, limit, offset };
  const unchanged = { tags: [EVERY_RECORD, ...withTags, ...withoutTags], storedChunks: matches.storedChunks };
  const hits = await walkInStore(db, walk, window, audit?.(matches.total), unchanged);
  // A walk from an offset below the total finds at least one hit in the snapshot the matches
  // describe: none means the store has moved on.
  return hits.length === 0 ? undefined : { total: matches.total, hits };
}

/** The window of matches as the walk sends it, made once per matches (they are never changed). */
const matchWindowOf = weakMemo(matchWindow);

/** How many index entries a walk is expected to read for the page. */
function walkCost(matches: Pick<Matches, 'total' | 'everyRecord'>, query: RecordPageQuery): number {
  return ((query.offset + query.limit) * matches.everyRecord) / matches.total;
}

/**
 * One page of hits in the requested order, each with all of its tags (sorted). `audit`, when
 * given, makes the audit row that the page's own statement writes where the page is one
 * statement (PostgreSQL's walk; made only then); otherwise `audited` is false and writing the
 * event is the caller's.
 */
export async function findRecordPage(
  db: DbOrTx,
  workspaceId: string,
  matches: Matches,
  query: RecordPageQuery,
  audit?: () => AuditRowAroundIds,
): Promise<RecordPage> {
  if (query.offset >= matches.total || query.limit === 0) return { hits: [], audited: false };
  const expectedWalk = walkCost(matches, query);
  if (expectedWalk > WALK_ROWS_PER_FETCHED_ROW * matches.total) {
    return { hits: await hitsInOrder(db, workspaceId, await fetchMatchesInOrder(db, workspaceId, matches, query)), audited: false };
  }
  if (dialectOfDb(db) === 'postgres') {
    const window = matchWindowOf(matches.positions);
    if (window) {
      const { direction, limit, offset } = query;
      const walk = { workspaceId, resourceType: matches.resourceType, column: ORDER_COLUMN[query.order], direction, limit, offset };
      return { hits: await walkInStore(db, walk, window, audit?.()), audited: audit !== undefined };
    }
  }
  return { hits: await hitsInOrder(db, workspaceId, await walkOrderIndex(db, workspaceId, matches, query, expectedWalk)), audited: false };
}

/**
 * Reads the order index in batches, keeping matching positions, until the page is complete. A
 * batch reads positions only (index entries end with `seq`, so no row is touched on SQLite); the
 * sort key of a batch's last entry is read only when another batch is needed, to go on after it.
 */
async function walkOrderIndex(
  db: DbOrTx,
  workspaceId: string,
  matches: Matches,
  query: RecordPageQuery,
  expectedWalk: number,
): Promise<number[]> {
  const column = ORDER_COLUMN[query.order];
  const readBatch =
    sqliteWalkReader(db, workspaceId, matches.resourceType, column, query.direction) ??
    (async (after: WalkAfter | null, size: number) => {
      let select = db
        .selectFrom('records')
        .select('records.seq')
        .where('records.workspace_id', '=', workspaceId)
        .where('records.resource_type', '=', matches.resourceType);
      if (after) {
        const { value, id } = after;
        select = select.where((eb) =>
          eb(eb.refTuple(`records.${column}`, 'records.id'), query.direction === 'asc' ? '>' : '<', eb.tuple(value, id)),
        );
      }
      const rows = await select.orderBy(`records.${column}`, query.direction).orderBy('records.id', query.direction).limit(size).execute();
      return rows.map((row) => Number(row.seq));
    });
  const found: number[] = [];
  let skipped = 0;
  let after: WalkAfter | null = null;
  // The first batch is sized to finish the page in one read when matches are spread evenly.
  let batch = Math.min(WALK_BATCH_MAX, Math.max(WALK_BATCH_MIN, Math.ceil(expectedWalk * 1.25) + 16));
  for (;;) {
    const seqs = await readBatch(after, batch);
    for (const seq of seqs) {
      if (!matches.positions.has(seq)) continue;
      if (skipped < query.offset) skipped++;
      else {
        found.push(seq);
        if (found.length === query.limit) return found;
      }
    }
    if (seqs.length < batch) return found;
    const last = await lastOfBatch(db, column, query.direction, seqs);
    // Every record of the batch was deleted meanwhile: the page ends here.
    if (!last) return found;
    after = last;
    batch = Math.min(WALK_BATCH_MAX, batch * 2);
  }
}

/** The sort key of a batch's last entry; if that record was deleted meanwhile, of the last one still there. */
async function lastOfBatch(
  db: DbOrTx,
  column: (typeof ORDER_COLUMN)[SearchOrder],
  direction: 'asc' | 'desc',
  seqs: number[],
): Promise<{ value: string; id: string } | undefined> {
  const select = db.selectFrom('records').select(['records.id', `records.${column} as value`]);
  const last = await select.where('records.seq', '=', seqs[seqs.length - 1]).executeTakeFirst();
  if (last) return last;
  const backwards = direction === 'asc' ? 'desc' : 'asc';
  return select.where(seqIn(db, seqs)).orderBy(`records.${column}`, backwards).orderBy('records.id', backwards).limit(1).executeTakeFirst();
}

/** Reads just the matching records, sorted and paged by the store. */
async function fetchMatchesInOrder(db: DbOrTx, workspaceId: string, matches: Matches, query: RecordPageQuery): Promise<number[]> {
  const column = ORDER_COLUMN[query.order];
  const rows = await db
    .selectFrom('records')
    .select('records.seq')
    .where(checkedOnlyOnSqlite(db, 'records.workspace_id'), '=', workspaceId)
    .where(checkedOnlyOnSqlite(db, 'records.resource_type'), '=', matches.resourceType)
    .where(seqIn(db, [...matches.positions.positions()]))
    .orderBy(`records.${column}`, query.direction)
    .orderBy('records.id', query.direction)
    .limit(query.limit)
    .offset(query.offset)
    .execute();
  return rows.map((row) => Number(row.seq));
}

/** The hits at the given positions, in the given order, with their tags: one read, a row per record (hit-rows.ts). */
async function hitsInOrder(db: DbOrTx, workspaceId: string, seqs: number[]): Promise<SearchHit[]> {
  if (seqs.length === 0) return [];
  // PostgreSQL answers an array, SQLite a JSON array as text.
  const tags =
    dialectOfDb(db) === 'postgres'
      ? sql<string[] | string>`array(select t.tag from record_tags t where t.record_id = records.id order by t.tag)`
      : sql<string[] | string>`(select json_group_array(t.tag order by t.tag) from record_tags t where t.record_id = records.id)`;
  const rows = await db
    .selectFrom('records')
    .select(['records.seq', 'records.id', 'records.ext_id', 'records.name', 'records.resource_type', tags.as('tags')])
    .where(checkedOnlyOnSqlite(db, 'records.workspace_id'), '=', workspaceId)
    .where(seqIn(db, seqs))
    .execute();
  const bySeq = new Map(rows.map((row) => [Number(row.seq), hitOf(row)]));
  return seqs.map((seq) => bySeq.get(seq)).filter((hit) => hit !== undefined);
}

/** `records.seq` is one of `seqs`, as one bound parameter (a JSON array on SQLite, an array on PostgreSQL). */
function seqIn(db: DbOrTx, seqs: number[]) {
  return dialectOfDb(db) === 'postgres'
    ? sql<boolean>`records.seq = any(${seqs}::bigint[])`
    : sql<boolean>`records.seq in (select value from json_each(${JSON.stringify(seqs)}))`;
}

/** The ids of the records at the given positions, in position order (search triggers page with it). */
export async function recordIdsAt(db: DbOrTx, workspaceId: string, seqs: number[]): Promise<string[]> {
  if (seqs.length === 0) return [];
  const rows = await db
    .selectFrom('records')
    .select('records.id')
    .where(checkedOnlyOnSqlite(db, 'records.workspace_id'), '=', workspaceId)
    .where(seqIn(db, seqs))
    .orderBy('records.seq')
    .execute();
  return rows.map((row) => row.id);
}
