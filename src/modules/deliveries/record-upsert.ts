/**
 * Search records from a delivery (DESIGN §7): Patients and Practitioners are created or updated
 * by extId, deleted ones leave search, and every Patient a resource points at gets a record.
 *
 * Decisions:
 * - Tags: an update replaces the tags the resource gave the record last time with the ones it
 *   carries now; tags added by pathways (`tag` automations) stay, even one the resource also
 *   carried (the pathway adopts it: `adoptTagsFromSource`). A record never delivered before (a
 *   stand-in, below, that a pathway may have tagged already) keeps its tags and gains the
 *   resource's.
 * - A resource about a patient the service has not seen (an Encounter before its Patient) makes a
 *   stand-in Patient record: extId = the referenced id, name = the id, no tags. Runs then have
 *   their subject from the first event, `wait_for_event` and `tag` work on it, and when the
 *   Patient resource arrives it fills that same record in.
 * - Inserts tolerate a concurrent delivery inserting the same record (ON CONFLICT DO NOTHING,
 *   then read back), so two processors never fail each other.
 */
import type { DbOrTx } from '../../storage/database.js';
import { uuidv7 } from '../../lib/ids.js';
import { recordKey, splitKey, type RecordChange } from '../../ingestion/resource-changes.js';
import type { RecordType } from '../../ingestion/records.js';
import { ID_CHUNK, chunks } from '../events/sql-chunks.js';
import type { RecordStore, NewRecord } from './record-store.js';

const ROW_CHUNK = 1000;

async function existingRecords(db: DbOrTx, workspaceId: string, keys: Iterable<string>): Promise<Map<string, string>> {
  const byType = new Map<string, string[]>();
  for (const key of keys) {
    const [type, extId] = splitKey(key);
    const extIds = byType.get(type);
    if (extIds) extIds.push(extId);
    else byType.set(type, [extId]);
  }
  const ids = new Map<string, string>();
  for (const [type, extIds] of byType) {
    for (const chunk of chunks(extIds, ID_CHUNK)) {
      const rows = await db
        .selectFrom('records')
        .select(['id', 'ext_id'])
        .where('workspace_id', '=', workspaceId)
        .where('resource_type', '=', type as RecordType)
        .where('ext_id', 'in', chunk)
        .execute();
      for (const row of rows) ids.set(recordKey(type as RecordType, row.ext_id), row.id);
    }
  }
  return ids;
}

async function removeRecords(db: DbOrTx, recordIds: string[]): Promise<void> {
  for (const chunk of chunks(recordIds, ID_CHUNK)) {
    await db.deleteFrom('record_tags').where('record_id', 'in', chunk).execute();
    await db.deleteFrom('records').where('id', 'in', chunk).execute();
  }
}

async function updateRecord(db: DbOrTx, recordId: string, change: RecordChange, at: string): Promise<void> {
  const { name, tags } = change.record;
  await db.updateTable('records').set({ name, updated_at: at }).where('id', '=', recordId).execute();
  const dropped = (change.previousSourceTags ?? []).filter((tag) => !tags.includes(tag));
  if (dropped.length > 0) {
    await db.deleteFrom('record_tags').where('record_id', '=', recordId).where('tag', 'in', dropped).execute();
  }
}

/** Inserts new records; returns key → id of every one now stored, including a concurrent winner's. */
async function insertNewRecords(db: DbOrTx, workspaceId: string, records: NewRecord[], at: string): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  for (const chunk of chunks(records, ROW_CHUNK)) {
    const inserted = await db
      .insertInto('records')
      .values(
        chunk.map((record) => ({
          id: record.id,
          workspace_id: workspaceId,
          resource_type: record.type,
          ext_id: record.extId,
          name: record.name,
          created_at: at,
          updated_at: at,
        })),
      )
      .onConflict((oc) => oc.columns(['workspace_id', 'resource_type', 'ext_id']).doNothing())
      .returning(['id', 'resource_type', 'ext_id'])
      .execute();
    for (const row of inserted) ids.set(recordKey(row.resource_type as RecordType, row.ext_id), row.id);
  }
  const lost = records.filter((record) => !ids.has(recordKey(record.type, record.extId)));
  if (lost.length > 0) {
    for (const [key, id] of await existingRecords(db, workspaceId, lost.map((record) => recordKey(record.type, record.extId)))) {
      ids.set(key, id);
    }
  }
  return ids;
}

async function addTags(db: DbOrTx, workspaceId: string, tags: { record_id: string; tag: string }[]): Promise<void> {
  for (const chunk of chunks(tags, ROW_CHUNK)) {
    await db
      .insertInto('record_tags')
      .values(chunk.map((row) => ({ ...row, workspace_id: workspaceId })))
      .onConflict((oc) => oc.columns(['record_id', 'tag']).doNothing())
      .execute();
  }
}

/** The record store over Kysely (PostgreSQL, and SQLite outside the processor's hot path). */
export function kyselyRecordStore(db: DbOrTx, workspaceId: string): RecordStore {
  return {
    existing: (keys) => existingRecords(db, workspaceId, keys),
    remove: (recordIds) => removeRecords(db, recordIds),
    update: (recordId, change, at) => updateRecord(db, recordId, change, at),
    insert: (records, at) => insertNewRecords(db, workspaceId, records, at),
    addTags: (tags) => addTags(db, workspaceId, tags),
  };
}

/** What a delivery's record changes leave: see `applyRecordChanges`. */
export interface AppliedRecords {
  /** patient id (extId) → record id, for every Patient the delivery touched or referenced that has a record now */
  patients: Map<string, string>;
  /** the records of the Patients it deleted (gone now; the audit names them) */
  removedPatientRecords: string[];
}

/**
 * Applies record changes and makes stand-ins for referenced patients. Answers the patients'
 * records (also the former patients of deleted resources whose record still exists: no
 * stand-in) and the records of the Patients it deleted.
 */
export async function applyRecordChanges(
  store: RecordStore,
  changes: ReadonlyMap<string, RecordChange | null>,
  referencedPatients: Iterable<string>,
  formerPatients: Iterable<string>,
  at: string,
): Promise<AppliedRecords> {
  const standIns = [...new Set(referencedPatients)].map((extId) => recordKey('Patient', extId)).filter((key) => !changes.has(key));
  const former = [...new Set(formerPatients)].map((extId) => recordKey('Patient', extId)).filter((key) => !changes.has(key));
  const existing = await store.existing(new Set([...changes.keys(), ...standIns, ...former]));

  const removed: string[] = [];
  const removedPatientRecords: string[] = [];
  const created: NewRecord[] = [];
  const tags: { record_id: string; tag: string }[] = [];
  for (const [key, change] of changes) {
    const id = existing.get(key);
    if (change === null) {
      if (id) removed.push(id);
      if (id && splitKey(key)[0] === 'Patient') removedPatientRecords.push(id);
      continue;
    }
    if (id) {
      await store.update(id, change, at);
      for (const tag of change.record.tags) tags.push({ record_id: id, tag });
    } else {
      const { resourceType, extId, name } = change.record;
      created.push({ id: uuidv7(Date.parse(at)), type: resourceType, extId, name, tags: change.record.tags });
    }
  }
  for (const key of standIns) {
    if (existing.has(key)) continue;
    const [, extId] = splitKey(key);
    created.push({ id: uuidv7(Date.parse(at)), type: 'Patient', extId, name: extId, tags: [] });
  }

  await store.remove(removed);
  const inserted = await store.insert(created, at);
  for (const record of created) {
    const id = inserted.get(recordKey(record.type, record.extId));
    if (id) for (const tag of record.tags) tags.push({ record_id: id, tag });
  }
  await store.addTags(tags);

  const patients = new Map<string, string>();
  for (const [key, id] of [...existing, ...inserted]) {
    const [type, extId] = splitKey(key);
    if (type === 'Patient' && changes.get(key) !== null) patients.set(extId, id);
  }
  return { patients, removedPatientRecords };
}
