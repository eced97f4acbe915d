/**
 * The SQL of search (DESIGN §8): records of one type in one workspace, narrowed by tag filters,
 * all on the server. Each `with` filter is an EXISTS over the record's tags and each `without`
 * a NOT EXISTS, both answered by the record_tags primary key (record_id, tag). Ordering walks
 * the `records_by_<field>` index (workspace_id, resource_type, field, id), with the id as the
 * tie-breaker so equal names page deterministically.
 */
import type { ExpressionBuilder } from 'kysely';
import type { Database, DbOrTx } from '../../storage/database.js';
import { tagsOf } from '../records/record.repository.js';
import type { ResourceType, SearchHit, SearchOrder, TagFilter } from './search.schemas.js';

export interface RecordCriteria {
  resourceType: ResourceType;
  filters: readonly TagFilter[];
}

export interface RecordPageQuery extends RecordCriteria {
  order: SearchOrder;
  direction: 'asc' | 'desc';
  limit: number;
  offset: number;
}

const ORDER_COLUMN = {
  name: 'records.name',
  createdAt: 'records.created_at',
  updatedAt: 'records.updated_at',
  extId: 'records.ext_id',
} as const satisfies Record<SearchOrder, string>;

/** The records of a type in a workspace that pass every tag filter (all ANDed). */
export function matchingRecords(db: DbOrTx, workspaceId: string, criteria: RecordCriteria) {
  let select = db
    .selectFrom('records')
    .where('records.workspace_id', '=', workspaceId)
    .where('records.resource_type', '=', criteria.resourceType);
  for (const filter of criteria.filters) {
    select = select.where((eb) => tagCondition(eb, 'records.id', filter));
  }
  return select;
}

/** EXISTS (`with`) or NOT EXISTS (`without`) a tag on the record whose id is `recordId`. */
function tagCondition(
  eb: ExpressionBuilder<Database & { driver: Database['record_tags'] }, 'records' | 'driver'>,
  recordId: 'records.id' | 'driver.record_id',
  filter: TagFilter,
) {
  const tagged = eb.exists(
    eb
      .selectFrom('record_tags')
      .select(eb.lit(1).as('one'))
      .whereRef('record_tags.record_id', '=', recordId)
      .where('record_tags.tag', '=', filter.tag),
  );
  return filter.op === 'with' ? tagged : eb.not(tagged);
}

/**
 * The number of matching records. With a `with` filter the count is driven from the tag index
 * (workspace_id, tag, record_id) of the rarest `with` tag, so it reads only the records that
 * carry that tag instead of every record of the workspace; the other filters are probes of the
 * (record_id, tag) key. Measured on 1,000,000 records: from over a second to a fraction of it.
 */
export async function countRecords(db: DbOrTx, workspaceId: string, criteria: RecordCriteria): Promise<number> {
  const withTags = criteria.filters.filter((filter) => filter.op === 'with').map((filter) => filter.tag);
  if (withTags.length === 0) {
    const row = await matchingRecords(db, workspaceId, criteria)
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }
  const driver = await rarestTag(db, workspaceId, withTags);
  let select = db
    .selectFrom('record_tags as driver')
    .innerJoin('records', 'records.id', 'driver.record_id')
    .where('driver.workspace_id', '=', workspaceId)
    .where('driver.tag', '=', driver)
    .where('records.resource_type', '=', criteria.resourceType);
  for (const filter of criteria.filters) {
    if (filter.op === 'with' && filter.tag === driver) continue;
    select = select.where((eb) => tagCondition(eb, 'driver.record_id', filter));
  }
  const row = await select.select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Of the given tags, the one the fewest records of the workspace carry (an index-only count). */
async function rarestTag(db: DbOrTx, workspaceId: string, tags: string[]): Promise<string> {
  if (tags.length === 1) return tags[0];
  const counts = await db
    .selectFrom('record_tags')
    .select(['tag', (eb) => eb.fn.countAll<number | string>().as('n')])
    .where('workspace_id', '=', workspaceId)
    .where('tag', 'in', tags)
    .groupBy('tag')
    .execute();
  const byTag = new Map(counts.map((row) => [row.tag, Number(row.n)]));
  return tags.reduce((best, tag) => ((byTag.get(tag) ?? 0) < (byTag.get(best) ?? 0) ? tag : best));
}

/** One page of hits, each with all of its tags (sorted). */
export async function findRecordPage(db: DbOrTx, workspaceId: string, query: RecordPageQuery): Promise<SearchHit[]> {
  const rows = await matchingRecords(db, workspaceId, query)
    .select(['records.id', 'records.ext_id', 'records.name', 'records.resource_type'])
    .orderBy(ORDER_COLUMN[query.order], query.direction)
    .orderBy('records.id', query.direction)
    .limit(query.limit)
    .offset(query.offset)
    .execute();
  const tags = await tagsOf(
    db,
    rows.map((row) => row.id),
  );
  return rows.map((row) => ({
    id: row.id,
    extId: row.ext_id,
    name: row.name,
    resourceType: row.resource_type,
    tags: tags.get(row.id) ?? [],
  }));
}
