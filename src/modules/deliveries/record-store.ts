/**
 * What applying record changes (record-upsert.ts) asks of the store, for one workspace: over
 * Kysely (`kyselyRecordStore`, record-upsert.ts) or over prepared SQLite statements
 * (`sqliteRecordStore`, record-store-sqlite.ts). Both give the same rows and answers.
 */
import type { RecordChange } from '../../ingestion/resource-changes.js';
import type { RecordType } from '../../ingestion/records.js';

export interface NewRecord {
  id: string;
  type: RecordType;
  extId: string;
  name: string;
  tags: string[];
}

export interface RecordStore {
  /** record key (`recordKey`) → id, for the keys that have a record */
  existing(keys: Iterable<string>): Promise<Map<string, string>>;
  /** removes the records and their tags */
  remove(recordIds: string[]): Promise<void>;
  /** renames the record and drops the tags the change says go (see record-upsert.ts) */
  update(recordId: string, change: RecordChange, at: string): Promise<void>;
  /** inserts; key → id of every one now stored, a concurrent winner's included */
  insert(records: NewRecord[], at: string): Promise<Map<string, string>>;
  /** adds tags, keeping ones already there */
  addTags(tags: { record_id: string; tag: string }[]): Promise<void>;
}
