/**
 * Turns claimed rows into runs a worker can execute: payload parsed, subject record with its
 * tags (one query for the whole batch), frozen graph from the cache, progress so far.
 */
import type { DbOrTx } from '../storage/database.js';
import { parseJson } from '../lib/json.js';
import { tagsOf } from '../modules/records/record.repository.js';
import { parseEngineState, type EngineState } from './engine-state.js';
import { startState } from './executor.js';
import type { GraphCache } from './graph-cache.js';
import type { GraphIndex } from './graph-index.js';
import type { RunInHand, SubjectView } from './run-context.js';
import type { ClaimedRunRow } from './sql/claim-runs.js';

export interface LoadedRun {
  row: ClaimedRunRow;
  run: RunInHand;
  /** null when the blueprint version cannot be read: the run errors. */
  graph: GraphIndex | null;
  state: EngineState | null;
}

export async function loadClaimedRuns(db: DbOrTx, graphs: GraphCache, rows: ClaimedRunRow[], at: string): Promise<LoadedRun[]> {
  const subjects = await loadSubjects(db, [...new Set(rows.flatMap((row) => (row.subject_record_id ? [row.subject_record_id] : [])))]);
  return Promise.all(
    rows.map(async (row) => {
      const graph = await graphs.get(row.source_id, row.source_version);
      const stored = parseEngineState(row.engine_state);
      return {
        row,
        graph,
        state: stored ?? (graph ? startState(graph, at) : null),
        run: {
          id: row.id,
          workspaceId: row.workspace_id,
          triggerId: row.trigger_id,
          payload: parseJson<unknown>(row.payload, null),
          subject: copySubject(row.subject_record_id ? subjects.get(row.subject_record_id) : undefined),
          subjectRecordId: row.subject_record_id,
        },
      };
    }),
  );
}

async function loadSubjects(db: DbOrTx, ids: string[]): Promise<Map<string, SubjectView>> {
  if (ids.length === 0) return new Map();
  const records = await db
    .selectFrom('records')
    .select(['id', 'ext_id', 'name', 'resource_type'])
    .where('id', 'in', ids)
    .execute();
  const tags = await tagsOf(db, records.map((record) => record.id));
  return new Map(
    records.map((record) => [
      record.id,
      { id: record.id, extId: record.ext_id, name: record.name, resourceType: record.resource_type, tags: tags.get(record.id) ?? [] },
    ]),
  );
}

/** Each run gets its own copy: a tag step updates the copy of the run that made it. */
function copySubject(subject: SubjectView | undefined): SubjectView | null {
  return subject ? { ...subject, tags: [...subject.tags] } : null;
}
