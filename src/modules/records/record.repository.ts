import type { DbOrTx } from '../../storage/database.js';
import { uuidv7 } from '../../lib/ids.js';
import { parseJson } from '../../lib/json.js';

/**
 * Search records and their tags. Patients and Practitioners come from ingestion; every run is a
 * Pathway record whose id is the run id and whose tags include its automation status.
 */
export type RecordType = 'Patient' | 'Pathway' | 'Practitioner';

export interface RecordInput {
  id?: string;
  resourceType: RecordType;
  extId: string;
  name: string;
  tags: string[];
}

export interface RecordRow {
  id: string;
  workspace_id: string;
  resource_type: RecordType;
  ext_id: string;
  name: string;
  created_at: string;
  updated_at: string;
}

/** Inserts new records with their tags, in as few statements as the rows allow. */
export async function insertRecords(db: DbOrTx, workspaceId: string, records: RecordInput[], at: string): Promise<string[]> {
  if (records.length === 0) return [];
  const rows = records.map((record) => ({
    id: record.id ?? uuidv7(),
    workspace_id: workspaceId,
    resource_type: record.resourceType,
    ext_id: record.extId,
    name: record.name,
    created_at: at,
    updated_at: at,
  }));
  await db.insertInto('records').values(rows).execute();
  const tags = rows.flatMap((row, i) =>
    [...new Set(records[i].tags)].map((tag) => ({ record_id: row.id, workspace_id: workspaceId, tag })),
  );
  if (tags.length > 0) await db.insertInto('record_tags').values(tags).execute();
  return rows.map((row) => row.id);
}

export async function findRecordByExtId(
  db: DbOrTx,
  workspaceId: string,
  resourceType: RecordType,
  extId: string,
): Promise<RecordRow | undefined> {
  return db
    .selectFrom('records')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('resource_type', '=', resourceType)
    .where('ext_id', '=', extId)
    .executeTakeFirst();
}

export async function findRecord(db: DbOrTx, workspaceId: string, recordId: string): Promise<RecordRow | undefined> {
  return db
    .selectFrom('records')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', recordId)
    .executeTakeFirst();
}

/**
 * Adds and removes tags of one record; idempotent (adding a tag twice keeps one).
 *
 * Answers false, changing nothing, when the record is gone.
 *
 * The record's row is written first: on PostgreSQL that locks it, so transactions changing one
 * record's tags take their locks in one order, the record then its tags (a delivery's do too:
 * deliveries/resource-locks.ts). Written last, two workers tagging one patient twice each (two
 * `tag` automations of a node) each held a tag row the other wanted while waiting for the
 * record: a deadlock, and a run retried 5 s later (a crash review, 2026-11-27: 73 under load).
 */
export async function changeTags(
  db: DbOrTx,
  workspaceId: string,
  recordId: string,
  add: string[],
  remove: string[],
  at: string,
): Promise<boolean> {
  // A record deleted meanwhile (a FHIR DELETE of the Patient) keeps no tags: added after its
  // deletion's transaction, a tag row outlived its record and left a position in the search
  // bitmaps with no record behind it.
  const touched = await db.updateTable('records').set({ updated_at: at }).where('id', '=', recordId).executeTakeFirst();
  if (Number(touched.numUpdatedRows) === 0) return false;
  if (remove.length > 0) {
    await db.deleteFrom('record_tags').where('record_id', '=', recordId).where('tag', 'in', remove).execute();
  }
  const toAdd = [...new Set(add)].filter((tag) => !remove.includes(tag));
  if (toAdd.length > 0) {
    await db
      .insertInto('record_tags')
      .values(toAdd.map((tag) => ({ record_id: recordId, workspace_id: workspaceId, tag })))
      .onConflict((oc) => oc.columns(['record_id', 'tag']).doNothing())
      .execute();
  }
  return true;
}

/**
 * Tags a pathway adds to a Patient or Practitioner record are the pathway's from then on: they
 * stop counting as given by the record's resource (`resource_states.source_tags`), so a later
 * delivery of the resource that no longer carries one of them leaves it where the pathway put it
 * (docs/decisions.md, "An update replaces the tags the resource gave its record last time").
 * Removals leave the resource's list alone: a delivery that still carries the tag gives it back.
 */
export async function adoptTagsFromSource(
  db: DbOrTx,
  workspaceId: string,
  record: { resourceType: string; extId: string },
  added: string[],
): Promise<void> {
  if (added.length === 0) return;
  const state = await db
    .selectFrom('resource_states')
    .select('source_tags')
    .where('workspace_id', '=', workspaceId)
    .where('resource_type', '=', record.resourceType)
    .where('resource_id', '=', record.extId)
    .executeTakeFirst();
  if (!state || state.source_tags === null) return;
  const given = parseJson<string[]>(state.source_tags, []);
  const kept = given.filter((tag) => !added.includes(tag));
  if (kept.length === given.length) return;
  await db
    .updateTable('resource_states')
    .set({ source_tags: JSON.stringify(kept) })
    .where('workspace_id', '=', workspaceId)
    .where('resource_type', '=', record.resourceType)
    .where('resource_id', '=', record.extId)
    .execute();
}

/** Tags of many records at once, for a page of search hits. */
export async function tagsOf(db: DbOrTx, recordIds: string[]): Promise<Map<string, string[]>> {
  const tags = new Map<string, string[]>(recordIds.map((id) => [id, []]));
  if (recordIds.length === 0) return tags;
  const rows = await db
    .selectFrom('record_tags')
    .select(['record_id', 'tag'])
    .where('record_id', 'in', recordIds)
    .orderBy('tag')
    .execute();
  for (const row of rows) tags.get(row.record_id)?.push(row.tag);
  return tags;
}
