/**
 * `audit_event_records`: which search records (Patient, Practitioner and Pathway records; a
 * run's Pathway record has the run's id) each audit event names, one row per (event, record), so
 * `GET /v1/audit-events?recordId=` ("who touched this patient's data") reads an index range
 * instead of every event's details. Written with the event itself, in its transaction
 * (modules/audit). `audit_by_key` answers `keyId=` ("what did this key do") the same way.
 *
 * The backfill names, for the events stored before this migration, the records the writers name
 * from now on (modules/audit/README.md): a run's or a record's own id (resource type `run` or
 * `record`), `details.subjectRecordId`, `details.patientRecordIds`, a search's `details.ids`; and
 * for events written before they named the run's patient record (run actions, tag changes of a
 * run's Pathway record), the subject of the run they name, read from `runs`; for a search of
 * Pathway records, the subjects of the runs it listed, as the writers name them. It reads every
 * audit event once (`details` only where its text mentions one of those fields). Only string
 * values name a record, on both stores: a list's null, number or object is left out (PostgreSQL's
 * `json_array_elements_text` gives a null for a JSON null, which the NOT NULL refused).
 *
 * SQLite: WITHOUT ROWID, so the primary key is the table and a lookup reads one B-tree.
 * `details` is text on both stores (JSON parsed by SQLite's json functions, cast to `json` on
 * PostgreSQL).
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import { PostgresAdapter, sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable('audit_event_records')
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('record_id', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('audit_event_records_pk', ['workspace_id', 'record_id', 'event_id'])
    .$call((table) => (postgres ? table : table.modifyEnd(sql`without rowid`)))
    .execute();
  await db.schema.createIndex('audit_by_key').on('audit_events').columns(['workspace_id', 'key_id', 'id']).execute();

  if (postgres) {
    await sql`insert into audit_event_records (workspace_id, record_id, event_id)
      select workspace_id, resource_id, id from audit_events
       where resource_type in ('run', 'record') and resource_id is not null
      union all
      select workspace_id, cast(details as json) ->> 'subjectRecordId', id from audit_events
       where details like '%"subjectRecordId"%' and json_typeof(cast(details as json) -> 'subjectRecordId') = 'string'
      union all
      select e.workspace_id, p.value #>> '{}', e.id from audit_events e
       cross join json_array_elements(case when json_typeof(cast(e.details as json) -> 'patientRecordIds') = 'array'
                                           then cast(e.details as json) -> 'patientRecordIds' else '[]' end) p
       where e.details like '%"patientRecordIds"%' and json_typeof(p.value) = 'string'
      union all
      select e.workspace_id, i.value #>> '{}', e.id from audit_events e
       cross join json_array_elements(case when json_typeof(cast(e.details as json) -> 'ids') = 'array'
                                           then cast(e.details as json) -> 'ids' else '[]' end) i
       where e.resource_type = 'search' and e.details like '%"ids"%' and json_typeof(i.value) = 'string'
      union all
      select e.workspace_id, r.subject_record_id, e.id from audit_events e
       join runs r on r.id = e.resource_id and r.workspace_id = e.workspace_id
       where e.resource_type = 'run' and r.subject_record_id is not null
      union all
      select e.workspace_id, r.subject_record_id, e.id from audit_events e
       join runs r on r.id = cast(e.details as json) ->> 'runId' and r.workspace_id = e.workspace_id
       where e.action = 'record.tags.change' and r.subject_record_id is not null
      union all
      select e.workspace_id, r.subject_record_id, e.id from audit_events e
       cross join json_array_elements(case when json_typeof(cast(e.details as json) -> 'ids') = 'array'
                                           then cast(e.details as json) -> 'ids' else '[]' end) i
       join runs r on r.id = i.value #>> '{}' and r.workspace_id = e.workspace_id
       where e.resource_type = 'search' and e.details like '%"Pathway"%' and cast(e.details as json) ->> 'resourceType' = 'Pathway'
         and json_typeof(i.value) = 'string' and r.subject_record_id is not null
      on conflict do nothing`.execute(db);
    return;
  }
  await sql`insert or ignore into audit_event_records (workspace_id, record_id, event_id)
    select workspace_id, resource_id, id from audit_events
     where resource_type in ('run', 'record') and resource_id is not null
    union all
    select workspace_id, details ->> '$.subjectRecordId', id from audit_events
     where details like '%"subjectRecordId"%' and json_type(details, '$.subjectRecordId') = 'text'
    union all
    select e.workspace_id, p.value, e.id from audit_events e, json_each(e.details, '$.patientRecordIds') p
     where e.details like '%"patientRecordIds"%' and json_type(e.details, '$.patientRecordIds') = 'array' and p.type = 'text'
    union all
    select e.workspace_id, i.value, e.id from audit_events e, json_each(e.details, '$.ids') i
     where e.resource_type = 'search' and e.details like '%"ids"%' and json_type(e.details, '$.ids') = 'array' and i.type = 'text'
    union all
    select e.workspace_id, r.subject_record_id, e.id from audit_events e
     join runs r on r.id = e.resource_id and r.workspace_id = e.workspace_id
     where e.resource_type = 'run' and r.subject_record_id is not null
    union all
    select e.workspace_id, r.subject_record_id, e.id from audit_events e
     join runs r on r.id = e.details ->> '$.runId' and r.workspace_id = e.workspace_id
     where e.action = 'record.tags.change' and r.subject_record_id is not null
    union all
    select e.workspace_id, r.subject_record_id, e.id from audit_events e, json_each(e.details, '$.ids') i
     join runs r on r.id = i.value and r.workspace_id = e.workspace_id
     where e.resource_type = 'search' and e.details like '%"Pathway"%' and e.details ->> '$.resourceType' = 'Pathway'
       and json_type(e.details, '$.ids') = 'array' and i.type = 'text' and r.subject_record_id is not null`.execute(db);
}
