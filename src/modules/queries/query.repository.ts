import type { DbOrTx, QueryTable } from '../../storage/database.js';

export type QueryRow = QueryTable;

export async function findQuery(db: DbOrTx, workspaceId: string, queryId: string): Promise<QueryRow | undefined> {
  return db
    .selectFrom('queries')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', queryId)
    .executeTakeFirst();
}
