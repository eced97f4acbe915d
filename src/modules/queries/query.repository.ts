import type { DbOrTx, QueryTable } from '../../storage/database.js';
import { dialectOfDb } from '../../storage/dialect.js';
import { holding } from '../../storage/row-lock.js';
import { newestFirstPage, type Page } from '../../lib/cursor.js';
import { parseJson } from '../../lib/json.js';
import { nameContains } from '../../lib/like.js';
import type { TagFilter } from '../search/search.schemas.js';
import type { QueryView } from './query.schemas.js';

export type QueryRow = QueryTable;

export function toQueryView(row: QueryRow): QueryView {
  return {
    queryId: row.id,
    name: row.name,
    resourceType: row.resource_type,
    filters: parseJson<TagFilter[]>(row.filters, []),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export async function findQuery(db: DbOrTx, workspaceId: string, queryId: string): Promise<QueryRow | undefined> {
  return db
    .selectFrom('queries')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', queryId)
    .executeTakeFirst();
}

/**
 * Reads a saved query and locks its row until the transaction ends (PostgreSQL; SQLite runs one
 * write transaction at a time anyway): `share` for a trigger that will reference it, `update` for
 * its deletion. The two exclude each other, so a delete never slips between a trigger's check that
 * the query exists and the trigger's write, nor a trigger between a delete's in-use check and the
 * delete (409 `query_in_use`).
 */
export async function lockQuery(
  tx: DbOrTx,
  workspaceId: string,
  queryId: string,
  mode: 'share' | 'update',
): Promise<QueryRow | undefined> {
  const select = tx.selectFrom('queries').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', queryId);
  return holding(tx, select, mode).executeTakeFirst();
}

export async function insertQuery(db: DbOrTx, row: QueryRow): Promise<void> {
  await db.insertInto('queries').values(row).execute();
}

export async function updateQuery(db: DbOrTx, queryId: string, changes: Partial<QueryRow>): Promise<void> {
  await db.updateTable('queries').set(changes).where('id', '=', queryId).execute();
}

/** Saved queries have no history to keep: deleting one removes the row. */
export async function deleteQueryRow(db: DbOrTx, workspaceId: string, queryId: string): Promise<void> {
  await db.deleteFrom('queries').where('workspace_id', '=', workspaceId).where('id', '=', queryId).execute();
}

export interface QueryListQuery {
  q?: string;
  resourceType?: QueryRow['resource_type'];
  limit: number;
  cursor?: string;
}

/** Newest first, keyset-paged on the time-ordered id (stable while rows are inserted). */
export async function listQueries(db: DbOrTx, workspaceId: string, query: QueryListQuery): Promise<Page<QueryView>> {
  let select = db.selectFrom('queries').selectAll().where('workspace_id', '=', workspaceId);
  if (query.q) select = select.where(nameContains('name', query.q, dialectOfDb(db)));
  if (query.resourceType) select = select.where('resource_type', '=', query.resourceType);
  return newestFirstPage(select, query, toQueryView, 'queries');
}
