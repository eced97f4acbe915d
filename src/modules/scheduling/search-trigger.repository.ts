/**
 * SQL the scheduler and evaluations need: due search triggers, the compare-and-set that claims a
 * tick, and a search trigger with everything its runs need.
 */
import type { DbOrTx } from '../../storage/database.js';
import { parseJson } from '../../lib/json.js';
import { ID_CHUNK, chunks } from '../events/sql-chunks.js';
import type { TagFilter } from '../search/search.schemas.js';
import type { StoredSchedule } from '../triggers/trigger.repository.js';
import type { TriggerForRuns } from '../events/run-plan.js';

export interface DueTrigger {
  id: string;
  schedule: string;
  next_run_at: string;
}

/** Active, live search triggers with a schedule whose next tick is at or before `now`, most overdue first. */
export async function findDueSearchTriggers(db: DbOrTx, now: string, limit: number): Promise<DueTrigger[]> {
  const rows = await db
    .selectFrom('triggers')
    .select(['id', 'schedule', 'next_run_at'])
    .where('next_run_at', '<=', now)
    .where('type', '=', 'search')
    .where('active', '=', 1)
    .where('deleted_at', 'is', null)
    .where('schedule', 'is not', null)
    .orderBy('next_run_at')
    .limit(limit)
    .execute();
  return rows.flatMap((row) => (row.schedule !== null && row.next_run_at !== null ? [{ ...row, schedule: row.schedule, next_run_at: row.next_run_at }] : []));
}

/**
 * Claims a tick for this process: moves `next_run_at` from the value that was read to the next
 * tick, only if nobody moved it first. Exactly one of any number of racing schedulers (in one
 * process or many, on either store) sees one row changed. As the first statement of the tick's
 * transaction it also takes SQLite's write lock (PostgreSQL: the row lock) until commit.
 *
 * `claimed`: the tick is this process's to run, and `last_tick_at` is moved on to it.
 * `ran-already`: the tick is not after `last_tick_at` (`next_run_at` was set back to a tick that
 * ran): the trigger is moved on, and nothing is to run. Judged on the row as the UPDATE finds it,
 * never on what was read before: read first, a tick that another scheduler ran and a PATCH then
 * set back passed the check and ran twice (a verification round). `taken`: someone moved it.
 */
export async function claimTick(
  db: DbOrTx,
  triggerId: string,
  readNextRunAt: string,
  nextRunAt: string | null,
  tick: string,
): Promise<'claimed' | 'ran-already' | 'taken'> {
  const moved = (ran: boolean) =>
    db
      .updateTable('triggers')
      .set(ran ? { next_run_at: nextRunAt } : { next_run_at: nextRunAt, last_tick_at: tick })
      .where('id', '=', triggerId)
      .where('next_run_at', '=', readNextRunAt)
      .where('active', '=', 1)
      .where('deleted_at', 'is', null)
      .where((eb) => (ran ? eb('last_tick_at', '>=', tick) : eb.or([eb('last_tick_at', 'is', null), eb('last_tick_at', '<', tick)])))
      .executeTakeFirst()
      .then((result) => Number(result.numUpdatedRows) === 1);
  if (await moved(false)) return 'claimed';
  return (await moved(true)) ? 'ran-already' : 'taken';
}

export interface SearchTrigger extends TriggerForRuns {
  workspace_id: string;
  tenant_id: string;
  type: 'web' | 'search' | 'event';
  active: number;
  query_id: string | null;
  schedule: StoredSchedule | null;
  /** null when the blueprint is gone */
  blueprint: { name: string; version: number } | null;
  /** null when the trigger has no saved query (not a search trigger) or it is gone */
  query: { resourceType: 'Patient' | 'Pathway' | 'Practitioner'; filters: TagFilter[] } | null;
}

/** A live trigger (any type, so callers can say why it cannot be evaluated) with blueprint, query and tenant. */
export async function loadTriggerForEvaluation(
  db: DbOrTx,
  triggerId: string,
  workspaceId?: string,
): Promise<SearchTrigger | undefined> {
  let select = db
    .selectFrom('triggers')
    .innerJoin('workspaces', 'workspaces.id', 'triggers.workspace_id')
    .leftJoin('diagrams', (join) => join.onRef('diagrams.id', '=', 'triggers.source_id').on('diagrams.type', '=', 'blueprint'))
    .leftJoin('queries', 'queries.id', 'triggers.query_id')
    .select([
      'triggers.id',
      'triggers.workspace_id',
      'workspaces.tenant_id',
      'triggers.type',
      'triggers.active',
      'triggers.source_id',
      'triggers.auto_start',
      'triggers.one_per_subject',
      'triggers.query_id',
      'triggers.schedule',
      'diagrams.name as blueprint_name',
      'diagrams.version as blueprint_version',
      'queries.resource_type as query_resource_type',
      'queries.filters as query_filters',
    ])
    .where('triggers.id', '=', triggerId)
    .where('triggers.deleted_at', 'is', null);
  if (workspaceId !== undefined) select = select.where('triggers.workspace_id', '=', workspaceId);
  const row = await select.executeTakeFirst();
  if (!row) return undefined;
  const blueprint =
    row.blueprint_name === null || row.blueprint_version === null ? null : { name: row.blueprint_name, version: row.blueprint_version };
  return {
    id: row.id,
    workspace_id: row.workspace_id,
    tenant_id: row.tenant_id,
    type: row.type,
    active: row.active,
    source_id: row.source_id,
    auto_start: row.auto_start,
    one_per_subject: row.one_per_subject,
    query_id: row.query_id,
    schedule: parseJson<StoredSchedule | null>(row.schedule, null),
    blueprint_name: blueprint?.name ?? '',
    blueprint_version: blueprint?.version ?? 0,
    blueprint,
    query:
      row.query_resource_type === null
        ? null
        : { resourceType: row.query_resource_type, filters: parseJson<TagFilter[]>(row.query_filters, []) },
  };
}

/**
 * Which of these Pathway records are runs started for another run (their subject is a Pathway
 * record): a search trigger over Pathway records leaves them out. Its own runs are such runs, and
 * so are those of any other trigger over Pathway records: matched, they fed on themselves, or two
 * triggers on each other, with more runs at every tick.
 */
export async function runsAboutRunsAmong(db: DbOrTx, recordIds: readonly string[]): Promise<Set<string>> {
  const found = new Set<string>();
  for (const chunk of chunks(recordIds, ID_CHUNK)) {
    const rows = await db
      .selectFrom('runs')
      .innerJoin('records as subject', 'subject.id', 'runs.subject_record_id')
      .select('runs.id')
      .where('runs.id', 'in', chunk)
      .where('subject.resource_type', '=', 'Pathway')
      .execute();
    for (const row of rows) found.add(row.id);
  }
  return found;
}
