import { holding } from '../../storage/row-lock.js';
import type { DbOrTx, TriggerTable } from '../../storage/database.js';
import { newestFirstPage, type Page } from '../../lib/cursor.js';
import { parseJson } from '../../lib/json.js';
import type { TriggerView } from './trigger.schemas.js';
import { Coalescer } from '../../lib/coalescer.js';
import { listParameter, runHot, type HotStatement } from '../../storage/hot-statement.js';

export type TriggerRow = TriggerTable;

/** The stored schedule keeps the anchor its series counts from (startAt, else when it was set). */
export interface StoredSchedule {
  interval: string;
  timezone: string;
  startAt?: string;
  anchor: string;
}

export function toTriggerView(row: TriggerRow): TriggerView {
  const stored = parseJson<StoredSchedule | null>(row.schedule, null);
  return {
    triggerId: row.id,
    name: row.name,
    sourceId: row.source_id,
    type: row.type,
    queryId: row.query_id,
    event: row.event,
    when: row.type === 'event' ? row.when_expression : null,
    schedule: stored
      ? { interval: stored.interval, timezone: stored.timezone, ...(stored.startAt ? { startAt: stored.startAt } : {}) }
      : null,
    nextRunAt: row.next_run_at,
    autoStart: row.auto_start === 1,
    active: row.active === 1,
    onePerSubject: row.type === 'web' ? null : row.one_per_subject === 1,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** A live (not deleted) trigger of the workspace. */
export async function findTrigger(db: DbOrTx, workspaceId: string, triggerId: string): Promise<TriggerRow | undefined> {
  return db
    .selectFrom('triggers')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', triggerId)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}

/** The trigger, held until the transaction ends (PostgreSQL; a SQLite write transaction holds the whole store). */
export async function lockTrigger(tx: DbOrTx, workspaceId: string, triggerId: string): Promise<TriggerRow | undefined> {
  const select = tx.selectFrom('triggers').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', triggerId).where('deleted_at', 'is', null);
  return holding(tx, select).executeTakeFirst();
}

export interface TriggerForFire {
  id: string;
  workspace_id: string;
  type: TriggerRow['type'];
  active: number;
  auto_start: number;
  source_id: string;
  blueprint_name: string | null;
  blueprint_version: number | null;
}

/** Every fire reads its trigger: prepared (storage/hot-statement.ts), one text for any number of ids. */
const TRIGGERS_FOR_FIRE_TEXT = (ids: string) => `
  select t.id, t.workspace_id, t.type, t.active, t.auto_start, t.source_id,
         d.name as blueprint_name, d.version as blueprint_version
  from triggers t left join diagrams d on d.id = t.source_id and d.type = 'blueprint'
  where t.id ${ids} and t.deleted_at is null`;
const TRIGGERS_FOR_FIRE: HotStatement = {
  name: 'carepath_triggers_for_fire_v1',
  sqlite: TRIGGERS_FOR_FIRE_TEXT('in (select value from json_each(?))'),
  postgres: TRIGGERS_FOR_FIRE_TEXT('= any($1::text[])'),
};

/** Live triggers with the current version of their blueprints, in one read (the fire path). */
export async function findTriggersForFire(db: DbOrTx, triggerIds: string[]): Promise<Map<string, TriggerForFire>> {
  const rows = await runHot<TriggerForFire>(db, TRIGGERS_FOR_FIRE, (dialect) => [listParameter(dialect, triggerIds)]);
  return new Map(rows.map((row) => [row.id, row]));
}

/**
 * Trigger reads of concurrent fires, coalesced into one query per turn of the event loop
 * (lib/coalescer.ts); nothing is cached beyond that, so a trigger switched off is seen at once.
 */
export class TriggerForFireResolver {
  private readonly byId: Coalescer<TriggerForFire>;

  constructor(db: DbOrTx) {
    this.byId = new Coalescer((ids) => findTriggersForFire(db, ids));
  }

  async find(workspaceId: string, triggerId: string): Promise<TriggerForFire | undefined> {
    const trigger = await this.byId.load(triggerId);
    return trigger && trigger.workspace_id === workspaceId ? trigger : undefined;
  }
}

export async function insertTrigger(db: DbOrTx, row: TriggerRow): Promise<void> {
  await db.insertInto('triggers').values(row).execute();
}

export async function updateTrigger(db: DbOrTx, triggerId: string, changes: Partial<TriggerRow>): Promise<void> {
  await db.updateTable('triggers').set(changes).where('id', '=', triggerId).execute();
}

export interface TriggerListQuery {
  type?: 'web' | 'search' | 'event';
  active?: boolean;
  sourceId?: string;
  limit: number;
  cursor?: string;
}

export async function listTriggers(db: DbOrTx, workspaceId: string, query: TriggerListQuery): Promise<Page<TriggerView>> {
  let select = db
    .selectFrom('triggers')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('deleted_at', 'is', null);
  if (query.type) select = select.where('type', '=', query.type);
  if (query.active !== undefined) select = select.where('active', '=', query.active ? 1 : 0);
  if (query.sourceId) select = select.where('source_id', '=', query.sourceId);
  return newestFirstPage(select, query, toTriggerView, 'triggers');
}

/** Whether any live, active trigger still uses a saved query (DESIGN: delete → 409 query_in_use). */
export async function queryInUse(db: DbOrTx, workspaceId: string, queryId: string): Promise<boolean> {
  const row = await db
    .selectFrom('triggers')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('query_id', '=', queryId)
    .where('active', '=', 1)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  return row !== undefined;
}
