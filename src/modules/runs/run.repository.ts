import { sql } from 'kysely';
import type { DbOrTx } from '../../storage/database.js';
import { checkedOnlyOnSqlite } from '../../storage/dialect.js';
import { newestFirstPage, type Page } from '../../lib/cursor.js';
import { RUN_VIEW_COLUMNS, toRunView, type RunView } from './run.view.js';
import { RUN_STATUSES, type RunStatus } from '../../engine/run-status.js';

export async function findRun(db: DbOrTx, workspaceId: string, runId: string): Promise<RunView | null> {
  const row = await db
    .selectFrom('runs')
    .select(RUN_VIEW_COLUMNS)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', runId)
    .executeTakeFirst();
  return row ? toRunView(row) : null;
}

export interface RunListQuery {
  triggerId?: string;
  idempotencyKey?: string;
  status?: string;
  limit: number;
  cursor?: string;
}

/** Newest first, keyset-paged on the time-ordered id. */
export async function listRuns(db: DbOrTx, workspaceId: string, query: RunListQuery): Promise<Page<RunView>> {
  return newestFirstPage(runListSelect(db, workspaceId, query), query, toRunView, 'runs');
}

/**
 * The runs a list reads, before its keyset. An Idempotency-Key names a handful of runs, so its
 * index `(workspace_id, idempotency_key, id)` drives the read whenever it is given: on SQLite the
 * other filters are written `+column`, which no index serves, or with a trigger and a status it
 * walked `runs_by_trigger_status`, every run of the trigger in that status, to find the key's
 * few (a cost review). PostgreSQL chooses from its statistics.
 */
export function runListSelect(db: DbOrTx, workspaceId: string, query: Omit<RunListQuery, 'limit'>) {
  const column = (name: 'trigger_id' | 'automation_status') => (query.idempotencyKey ? checkedOnlyOnSqlite(db, name) : sql.ref<string>(name));
  let select = db.selectFrom('runs').select(RUN_VIEW_COLUMNS).where('workspace_id', '=', workspaceId);
  if (query.triggerId) select = select.where(column('trigger_id'), '=', query.triggerId);
  if (query.idempotencyKey) select = select.where('idempotency_key', '=', query.idempotencyKey);
  if (query.status) select = select.where(column('automation_status'), '=', query.status);
  return select;
}

export interface TriggerRunStatus {
  counts: Record<string, number>;
  recentRuns: { runId: string; name: string; automationStatus: RunStatus; createdAt: string }[];
}

/** All eight counts (zero included) and the ten newest runs of a trigger. */
export async function triggerRunStatus(db: DbOrTx, workspaceId: string, triggerId: string): Promise<TriggerRunStatus> {
  const grouped = await db
    .selectFrom('runs')
    .select(['automation_status', (eb) => eb.fn.countAll<number>().as('n')])
    .where('workspace_id', '=', workspaceId)
    .where('trigger_id', '=', triggerId)
    .groupBy('automation_status')
    .execute();
  const counts: Record<string, number> = Object.fromEntries(RUN_STATUSES.map((status) => [status, 0]));
  for (const row of grouped) counts[row.automation_status] = Number(row.n);
  const recent = await db
    .selectFrom('runs')
    .select(['id', 'name', 'automation_status', 'created_at'])
    .where('workspace_id', '=', workspaceId)
    .where('trigger_id', '=', triggerId)
    .orderBy('id', 'desc')
    .limit(10)
    .execute();
  return {
    counts,
    recentRuns: recent.map((row) => ({
      runId: row.id,
      name: row.name,
      automationStatus: row.automation_status as RunStatus,
      createdAt: row.created_at,
    })),
  };
}
