/** SQL of resource states: what the service remembers of each delivered resource. */
import type { DbOrTx } from '../../storage/database.js';
import { parseJson } from '../../lib/json.js';
import { splitKey, stateKey, type ResourceState } from '../../ingestion/resource-changes.js';
import { ID_CHUNK, chunks } from '../events/sql-chunks.js';

/** Rows per upsert: 8 columns × 1,000 stays under both stores' bound-parameter limits. */
const UPSERT_CHUNK = 1000;

function idsByType(keys: Iterable<string>): Map<string, string[]> {
  const byType = new Map<string, string[]>();
  for (const key of keys) {
    const [type, id] = splitKey(key);
    const ids = byType.get(type);
    if (ids) ids.push(id);
    else byType.set(type, [id]);
  }
  return byType;
}

/**
 * The stored states of those keys that have one. One query per 1,000 ids whatever the mix of
 * types (the primary key serves `resource_type IN (…) AND resource_id IN (…)`); pairs that the
 * cross product adds but were not asked for are dropped.
 */
export async function readResourceStates(db: DbOrTx, workspaceId: string, keys: Iterable<string>): Promise<Map<string, ResourceState>> {
  const wanted = new Set(keys);
  const states = new Map<string, ResourceState>();
  const byType = idsByType(wanted);
  const types = [...byType.keys()];
  const ids = [...new Set([...byType.values()].flat())];
  for (const chunk of chunks(ids, ID_CHUNK)) {
    const rows = await db
      .selectFrom('resource_states')
      .select(['resource_type', 'resource_id', 'status', 'patient_id', 'source_tags'])
      .where('workspace_id', '=', workspaceId)
      .where('resource_type', 'in', types)
      .where('resource_id', 'in', chunk)
      .execute();
    for (const row of rows) {
      const key = stateKey(row.resource_type, row.resource_id);
      if (!wanted.has(key)) continue;
      states.set(key, {
        status: row.status,
        patientId: row.patient_id,
        sourceTags: row.source_tags === null ? null : parseJson<string[]>(row.source_tags, []),
      });
    }
  }
  return states;
}

/** Writes final states: upserts for the ones given, deletes for the ones set to null. */
export async function writeResourceStates(
  db: DbOrTx,
  workspaceId: string,
  states: ReadonlyMap<string, ResourceState | null>,
  deliveryId: string,
  at: string,
): Promise<void> {
  const upserts = [];
  const deleted: string[] = [];
  for (const [key, state] of states) {
    if (state === null) {
      deleted.push(key);
      continue;
    }
    const [type, id] = splitKey(key);
    upserts.push({
      workspace_id: workspaceId,
      resource_type: type,
      resource_id: id,
      status: state.status,
      patient_id: state.patientId,
      source_tags: state.sourceTags === null ? null : JSON.stringify(state.sourceTags),
      delivery_id: deliveryId,
      updated_at: at,
    });
  }
  for (const chunk of chunks(upserts, UPSERT_CHUNK)) {
    await db
      .insertInto('resource_states')
      .values(chunk)
      .onConflict((oc) =>
        oc.columns(['workspace_id', 'resource_type', 'resource_id']).doUpdateSet((eb) => ({
          status: eb.ref('excluded.status'),
          patient_id: eb.ref('excluded.patient_id'),
          source_tags: eb.ref('excluded.source_tags'),
          delivery_id: eb.ref('excluded.delivery_id'),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      )
      .execute();
  }
  for (const [type, ids] of idsByType(deleted)) {
    for (const chunk of chunks(ids, ID_CHUNK)) {
      await db
        .deleteFrom('resource_states')
        .where('workspace_id', '=', workspaceId)
        .where('resource_type', '=', type)
        .where('resource_id', 'in', chunk)
        .execute();
    }
  }
}
