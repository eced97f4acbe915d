/**
 * The record store (record-store.ts) over prepared SQLite statements: one single-row statement
 * per record or tag, no Kysely on the processor's hot path (sqlite-delivery-statements.ts says
 * why and when they may run). Same SQL effects as `kyselyRecordStore`.
 */
import { recordKey, splitKey } from '../../ingestion/resource-changes.js';
import type { RecordStore } from './record-store.js';
import type { SqliteDeliveryStatements } from './sqlite-delivery-statements.js';

export function sqliteRecordStore(s: SqliteDeliveryStatements, workspaceId: string): RecordStore {
  const findId = (type: string, extId: string): string | undefined =>
    (s.findRecord.get(workspaceId, type, extId) as { id: string } | undefined)?.id;
  return {
    async existing(keys) {
      const ids = new Map<string, string>();
      for (const key of keys) {
        const [type, extId] = splitKey(key);
        const id = findId(type, extId);
        if (id !== undefined) ids.set(key, id);
      }
      return ids;
    },
    async remove(recordIds) {
      for (const id of recordIds) {
        s.deleteAllTags.run(id);
        s.deleteRecord.run(id);
      }
    },
    async update(recordId, change, at) {
      const { name, tags } = change.record;
      s.renameRecord.run(name, at, recordId);
      const dropped = (change.previousSourceTags ?? []).filter((tag) => !tags.includes(tag));
      if (dropped.length > 0) s.deleteTagsIn.run(recordId, JSON.stringify(dropped));
    },
    async insert(records, at) {
      const ids = new Map<string, string>();
      for (const record of records) {
        const key = recordKey(record.type, record.extId);
        const { changes } = s.insertRecord.run(record.id, workspaceId, record.type, record.extId, record.name, at, at);
        // 0 changes: a record with this key exists already (a concurrent delivery's): use it.
        const id = changes === 1 ? record.id : findId(record.type, record.extId);
        if (id !== undefined) ids.set(key, id);
      }
      return ids;
    },
    async addTags(tags) {
      for (const { record_id, tag } of tags) s.insertTag.run(record_id, workspaceId, tag);
    },
  };
}
