/**
 * Saved queries: the rules beyond the schemas. A query that a live, active trigger still runs
 * cannot be deleted (409 `query_in_use`); deactivate or delete the trigger first.
 */
import { claimCreateKey, type CreateKey } from '../idempotency/create-keys.js';
import type { Db } from '../../storage/database.js';
import type { RequestContext } from '../../auth/context.js';
import { ApiError, notFound } from '../../lib/errors.js';
import { uuidv7 } from '../../lib/ids.js';
import { queryInUse } from '../triggers/trigger.repository.js';
import { recordAudit } from '../audit/audit.repository.js';
import { setupCreated, setupDeleted, setupUpdated } from '../audit/setup-audit.js';
import type { CreateQueryBody, QueryView, UpdateQueryBody } from './query.schemas.js';
import { deleteQueryRow, findQuery, insertQuery, lockQuery, toQueryView, updateQuery, type QueryRow } from './query.repository.js';

export async function createQuery(db: Db, ctx: RequestContext, body: CreateQueryBody, now: Date, createKey?: CreateKey): Promise<QueryView> {
  const at = now.toISOString();
  const row: QueryRow = {
    id: uuidv7(now.getTime()),
    workspace_id: ctx.workspaceId,
    name: body.name,
    resource_type: body.resourceType,
    filters: JSON.stringify(body.filters ?? []),
    created_at: at,
    updated_at: at,
  };
  const view = toQueryView(row);
  await db.transaction().execute(async (tx) => {
    await claimCreateKey(tx, ctx.workspaceId, createKey, row.id, at);
    await insertQuery(tx, row);
    await recordAudit(tx, ctx, at, [setupCreated('query', row.id, view)]);
  });
  return view;
}

export async function changeQuery(
  db: Db,
  ctx: RequestContext,
  queryId: string,
  body: UpdateQueryBody,
  now: Date,
): Promise<QueryView> {
  const row = await findQuery(db, ctx.workspaceId, queryId);
  if (!row) throw notFound('query');
  // Nothing to change: the query as it is, not moved (`updatedAt`) and not audited as changed.
  if (Object.keys(body).length === 0) return toQueryView(row);
  const changes: Partial<QueryRow> = { updated_at: now.toISOString() };
  if (body.name !== undefined) changes.name = body.name;
  if (body.resourceType !== undefined) changes.resource_type = body.resourceType;
  if (body.filters !== undefined) changes.filters = JSON.stringify(body.filters);
  return db.transaction().execute(async (tx) => {
    // Held, as it is now: one deleted meanwhile is a 404, not a 200 for a query that is gone.
    const current = await lockQuery(tx, ctx.workspaceId, queryId, 'update');
    if (!current) throw notFound('query');
    const view = toQueryView({ ...current, ...changes });
    await updateQuery(tx, queryId, changes);
    await recordAudit(tx, ctx, changes.updated_at!, [setupUpdated('query', queryId, body, view)]);
    return view;
  });
}

export async function deleteQuery(db: Db, ctx: RequestContext, queryId: string, now: Date): Promise<void> {
  await db.transaction().execute(async (tx) => {
    const query = await lockQuery(tx, ctx.workspaceId, queryId, 'update');
    if (!query) throw notFound('query');
    if (await queryInUse(tx, ctx.workspaceId, queryId)) {
      throw new ApiError('query_in_use', 'an active trigger still uses this query; deactivate or delete the trigger first');
    }
    await deleteQueryRow(tx, ctx.workspaceId, queryId);
    await recordAudit(tx, ctx, now.toISOString(), [setupDeleted('query', queryId, query.name)]);
  });
}
