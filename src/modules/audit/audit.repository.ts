import { sql, type RawBuilder } from 'kysely';
import type { AuditEventTable, DbOrTx } from '../../storage/database.js';
import type { RequestContext } from '../../auth/context.js';
import { lowestUuidv7At, uuidv7 } from '../../lib/ids.js';
import { newestFirstPage, type Page } from '../../lib/cursor.js';
import { parseJson } from '../../lib/json.js';
import { dialectOfDb } from '../../storage/dialect.js';
import { withinTransaction } from '../../storage/transaction.js';

/** The actions the interface spec names, plus the ones this service adds (DESIGN §10). */
export type AuditAction =
  | 'run.create'
  | 'run.start'
  | 'run.cancel'
  | 'run.pause'
  | 'run.resume'
  | 'search.execute'
  // Reads that hand out health data beyond search: a run's step timeline, an errored run's message.
  | 'run.steps.read'
  | 'run.graph.read'
  | 'run.error.read'
  // Reads of the trail itself (audit-read.ts): a page of the API's list, an admin export.
  | 'audit.read'
  | 'audit.export'
  // Set-up changes through the API (setup-audit.ts) and admin commands (cli/admin):
  | `${'trigger' | 'query' | 'webhook'}.${'create' | 'update' | 'delete'}`
  | 'workspace.create'
  | 'key.create'
  | 'key.revoke'
  | 'blueprint.import'
  | 'webhook.rotate_secret'
  | 'secret.set'
  | 'secret.delete'
  | 'delivery.retry'
  // Health data taken in from a webhook delivery (modules/deliveries/delivery-apply.ts):
  | 'delivery.process'
  | (string & {});

export interface AuditInput {
  action: AuditAction;
  resourceType: string | null;
  resourceId: string | null;
  outcome?: 'success' | 'failure';
  details?: Record<string, unknown>;
}

export interface AuditEvent {
  id: string;
  at: string;
  action: string;
  requestId: string | null;
  keyId: string | null;
  keyName: string | null;
  workspaceId: string;
  resourceType: string | null;
  resourceId: string | null;
  outcome: string;
  details: Record<string, unknown>;
}

export function auditRow(ctx: RequestContext, at: string, input: AuditInput) {
  return {
    id: uuidv7(Date.parse(at)),
    tenant_id: ctx.tenantId,
    workspace_id: ctx.workspaceId,
    at,
    action: input.action,
    request_id: ctx.requestId,
    key_id: ctx.keyId || null,
    key_name: ctx.keyName,
    resource_type: input.resourceType,
    resource_id: input.resourceId,
    outcome: input.outcome ?? 'success',
    details: JSON.stringify(input.details ?? {}),
  };
}

/**
 * The search records (Patient, Practitioner, Pathway; a run's Pathway record has the run's id)
 * an event names, which `GET /v1/audit-events?recordId=` finds it by (README.md has the mapping
 * per action). Read from the event alone, by field: its resource id when the resource is a run
 * or a record, `details.subjectRecordId`, `details.patientRecordIds`, and a search's
 * `details.ids` (handed on as they are, not copied: the store makes a page's rows).
 * Migration 0021 names the same for the events stored before it; the stores' own writers
 * (run-creation/batch-writer-*.ts, search/walk-in-store.ts) name the same in SQL.
 */
export function recordIdsOf(input: AuditInput): readonly string[] {
  const details = input.details ?? {};
  const own = (input.resourceType === 'run' || input.resourceType === 'record') && input.resourceId ? [input.resourceId] : [];
  const subject = typeof details.subjectRecordId === 'string' ? [details.subjectRecordId] : [];
  const patients = stringsIn(details.patientRecordIds);
  const returned = input.resourceType === 'search' ? stringsIn(details.ids) : [];
  if (own.length + subject.length + patients.length === 0) return returned;
  return [...own, ...subject, ...patients, ...returned];
}

function stringsIn(value: unknown): readonly string[] {
  if (!Array.isArray(value)) return [];
  return value.every((item) => typeof item === 'string') ? value : value.filter((item) => typeof item === 'string');
}

/**
 * Whether the records an event names are runs' Pathway records whose patients it names too: a
 * search of Pathway records hands out which pathways a patient is on, and where in them, so
 * "who touched this patient's data" lists it. The store reads the runs' subjects where it writes
 * the index rows (their ids are not in the event).
 */
export function namesRunSubjects(input: AuditInput): boolean {
  return input.resourceType === 'search' && input.details?.resourceType === 'Pathway';
}

/** An event's row and the records it names: what `writeAuditEntries` writes. */
export interface AuditEntry {
  row: ReturnType<typeof auditRow>;
  recordIds: readonly string[];
  /** `namesRunSubjects`: the subjects of the runs among `recordIds` are named as well. */
  runSubjects: boolean;
}

export function auditEntry(ctx: RequestContext, at: string, input: AuditInput): AuditEntry {
  return { row: auditRow(ctx, at, input), recordIds: recordIdsOf(input), runSubjects: namesRunSubjects(input) };
}

/** Appends audit events; call it in the same transaction as the change it records. */
export async function recordAudit(db: DbOrTx, ctx: RequestContext, at: string, inputs: AuditInput[]): Promise<void> {
  await writeAuditEntries(
    db,
    inputs.map((input) => auditEntry(ctx, at, input)),
  );
}

/**
 * Writes events and the rows that index them by record (`audit_event_records`) together, so an
 * event is never found without its index rows or the other way round. PostgreSQL: ONE statement
 * (the events' INSERT a data-modifying CTE), as many round trips as before. SQLite: the two
 * INSERTs in one transaction (the caller's, when it holds one). The index rows travel as one
 * JSON parameter, `[[eventId, workspaceId, [recordId, …]], …]`, and the store makes the rows
 * (no work per id here); a record named twice by one event is one row. The events that name the
 * subjects of their runs (`runSubjects`: a search of Pathway records) travel once more, and only
 * then does the statement read those subjects from `runs`.
 */
export async function writeAuditEntries(db: DbOrTx, entries: readonly AuditEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const rows = entries.map((entry) => entry.row);
  const naming = entries.filter((entry) => entry.recordIds.length > 0);
  if (naming.length === 0) {
    await db.insertInto('audit_events').values(rows).execute();
    return;
  }
  const postgres = dialectOfDb(db) === 'postgres';
  const viaRuns = naming.filter((entry) => entry.runSubjects);
  const named = namedRecords(postgres, naming);
  const source =
    viaRuns.length === 0
      ? named
      : sql`${named}
            union all
            select n.workspace_id, runs.subject_record_id, n.event_id from (${namedRecords(postgres, viaRuns)}) n
              join runs on runs.id = n.record_id and runs.workspace_id = n.workspace_id
             where runs.subject_record_id is not null`;
  const indexRows = <Q extends Pick<DbOrTx, 'insertInto'>>(q: Q) =>
    q
      .insertInto('audit_event_records')
      .columns(['workspace_id', 'record_id', 'event_id'])
      .expression(source)
      .onConflict((conflict) => conflict.doNothing());
  if (postgres) {
    await indexRows(db.with('written', (qc) => qc.insertInto('audit_events').values(rows))).execute();
    return;
  }
  await withinTransaction(db, async (tx) => {
    await tx.insertInto('audit_events').values(rows).execute();
    await indexRows(tx).execute();
  });
}

/**
 * `(workspace_id, record_id, event_id)`, one row per record each entry names, unfolded by the
 * store from one JSON parameter. On SQLite `where true` ends the FROM: `ON CONFLICT` right after
 * a bare `FROM` reads as a join's constraint.
 */
function namedRecords(postgres: boolean, entries: readonly AuditEntry[]) {
  const json = JSON.stringify(entries.map((entry) => [entry.row.id, entry.row.workspace_id, entry.recordIds]));
  return postgres
    ? sql`select e.value ->> 1 as workspace_id, r.value as record_id, e.value ->> 0 as event_id
          from json_array_elements(cast(${json} as json)) e cross join json_array_elements_text(e.value -> 2) r`
    : sql`select e.value ->> 1 as workspace_id, r.value as record_id, e.value ->> 0 as event_id
          from json_each(${json}) e, json_each(e.value, '$[2]') r where true`;
}

export interface AuditFilters {
  action?: string;
  since?: string;
  /** Events that name this search record (`audit_event_records`). */
  recordId?: string;
  /** Events made with this key. */
  keyId?: string;
}

export interface AuditListQuery extends AuditFilters {
  limit: number;
  cursor?: string;
}

export async function listAuditEvents(db: DbOrTx, workspaceId: string, query: AuditListQuery): Promise<Page<AuditEvent>> {
  const { select, idColumn } = filteredEvents(db, workspaceId, query);
  return newestFirstPage(select, query, toAuditEvent, 'audit-events', idColumn);
}

/** A read of events that a keyset pages on (`newestFirstPage`, `listAuditEventsAfter`). */
interface EventSelect {
  where(lhs: RawBuilder<string>, op: '<' | '>', rhs: string): EventSelect;
  orderBy(ref: RawBuilder<string>, direction: 'asc' | 'desc'): EventSelect;
  limit(n: number): EventSelect;
  execute(): Promise<AuditEventTable[]>;
}

/**
 * The workspace's events that pass `filters`, keyed by `idColumn` (the event's id, as the
 * column a keyset reads in order). With `recordId` the read starts from the record's index rows,
 * `(workspace_id, record_id, event_id)`, newest or oldest first, and joins each event by its
 * primary key; the other filters are checked on the events read. Without it, `keyId` reads the
 * `(workspace_id, key_id, id)` index, `action` the `(workspace_id, action, id)` one, and the rest
 * the `(workspace_id, id)` one. A record or key of another workspace names none of this
 * workspace's events: its list is empty.
 */
function filteredEvents(db: DbOrTx, workspaceId: string, filters: AuditFilters): { select: EventSelect; idColumn: string } {
  if (filters.recordId !== undefined) {
    // CROSS JOIN: SQLite reads its left side first, whatever it guesses of the tables' sizes
    // (without it, it read the workspace's events by `e.workspace_id` and probed the index rows
    // for each: every event of the workspace for one record's page). PostgreSQL plans it as the join.
    let select = db
      .selectFrom('audit_event_records as r')
      .crossJoin('audit_events as e')
      .whereRef('e.id', '=', 'r.event_id')
      .selectAll('e')
      .where('r.workspace_id', '=', workspaceId)
      .where('r.record_id', '=', filters.recordId)
      .where('e.workspace_id', '=', workspaceId);
    if (filters.action) select = select.where('e.action', '=', filters.action);
    if (filters.keyId !== undefined) select = select.where('e.key_id', '=', filters.keyId);
    if (filters.since) select = select.where('e.at', '>=', filters.since).where('r.event_id', '>=', idsFrom(filters.since));
    return { select, idColumn: 'r.event_id' };
  }
  let select = db.selectFrom('audit_events').selectAll().where('workspace_id', '=', workspaceId);
  if (filters.action) select = select.where('action', '=', filters.action);
  if (filters.keyId !== undefined) select = select.where('key_id', '=', filters.keyId);
  if (filters.since) select = select.where('at', '>=', filters.since).where('id', '>=', idsFrom(filters.since));
  return { select, idColumn: 'id' };
}

/**
 * Every event's id is a UUID v7 of its `at` or of a later time (`auditRow`: the id generator never
 * goes back), so events at or after `since` have ids at or after this one: `since` becomes a
 * range of the `(workspace_id, id)` index. Filtered on `at` alone, a `since` read every event of
 * the workspace (1 s at 2,000,000 events on PostgreSQL, over 45 s on SQLite for a `since` in the
 * future; a scale review).
 */
function idsFrom(since: string): string {
  return lowestUuidv7At(Date.parse(since));
}

/** One page in write order (oldest first) after an id: what an export reads forward with. */
export async function listAuditEventsAfter(
  db: DbOrTx,
  workspaceId: string,
  query: AuditFilters & { afterId?: string; limit: number },
): Promise<AuditEvent[]> {
  const { select, idColumn } = filteredEvents(db, workspaceId, query);
  const id = sql.ref<string>(idColumn);
  const after = query.afterId === undefined ? select : select.where(id, '>', query.afterId);
  const rows = await after.orderBy(id, 'asc').limit(query.limit).execute();
  return rows.map(toAuditEvent);
}

function toAuditEvent(row: AuditEventTable): AuditEvent {
  return {
    id: row.id,
    at: row.at,
    action: row.action,
    requestId: row.request_id,
    keyId: row.key_id,
    keyName: row.key_name,
    workspaceId: row.workspace_id,
    resourceType: row.resource_type,
    resourceId: row.resource_id,
    outcome: row.outcome,
    details: parseJson<Record<string, unknown>>(row.details, {}),
  };
}
