/**
 * The SQL of search (DESIGN §8): records of one type in one workspace, narrowed by tag filters,
 * all on the server. Each `with` filter is an EXISTS over the record's tags and each `without`
 * a NOT EXISTS, both answered by the record_tags primary key (record_id, tag). Ordering walks
 * the `records_by_<field>` index (workspace_id, resource_type, field, id), with the id as the
 * tie-breaker so equal names page deterministically.
 */
import type { DbOrTx } from '../../storage/database.js';
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

function matchingRecords(db: DbOrTx, workspaceId: string, criteria: RecordCriteria) {
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

export async function countRecords(db: DbOrTx, workspaceId: string, criteria: RecordCriteria): Promise<number> {
  const row = await matchingRecords(db, workspaceId, criteria)
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow();
  // PostgreSQL answers count(*) as a bigint, which pg hands over as text.
  return Number(row.n);
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
