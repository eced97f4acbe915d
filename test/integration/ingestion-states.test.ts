import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { readResourceStates, writeResourceStates } from '../../src/modules/deliveries/resource-state.repository.js';
import { stateKey, type ResourceState } from '../../src/ingestion/resource-changes.js';

/** Resource states travel as one JSON parameter (json-rows.ts): values must come back exactly. */
describeEachStore('resource states', (env) => {
  it('writes and reads exactly the pairs asked for, nulls, tags and odd ids included', async () => {
    const ws = await env.workspace();
    const dialect = env.container.store.dialect;
    const at = '2025-01-01T00:00:00.000Z';
    const states = new Map<string, ResourceState | null>([
      [stateKey('Encounter', 'x'), { status: 'finished', patientId: 'p-1', sourceTags: null, contentHash: 'h-x', lastUpdated: '2024-05-01T10:00:00.000Z', versionId: '3' }],
      [stateKey('Condition', 'y'), { status: null, patientId: null, sourceTags: null, contentHash: null, lastUpdated: null, versionId: null }],
      [stateKey('Encounter', 'y'), { status: 'planned', patientId: 'p-2', sourceTags: null, contentHash: 'h-y', lastUpdated: null, versionId: 'v-7' }],
      [stateKey('Patient', 'quote"\'\\ü'), { status: null, patientId: 'quote"\'\\ü', sourceTags: ['vip', 'a:b'], contentHash: 'h"\\', lastUpdated: '2024-05-02T00:00:00.000Z', versionId: null }],
    ]);
    await env.db.transaction().execute((tx) => writeResourceStates(tx, dialect, ws.workspaceId, states, 'd-1', at));

    // Condition/x and Encounter/y are not asked for, though their type and id each are.
    const read = await readResourceStates(env.db, dialect, ws.workspaceId, [stateKey('Encounter', 'x'), stateKey('Condition', 'y'), stateKey('Patient', 'quote"\'\\ü'), stateKey('Condition', 'x')]);
    expect(Object.fromEntries(read)).toEqual({
      [stateKey('Encounter', 'x')]: { status: 'finished', patientId: 'p-1', sourceTags: null, contentHash: 'h-x', lastUpdated: '2024-05-01T10:00:00.000Z', versionId: '3' },
      [stateKey('Condition', 'y')]: { status: null, patientId: null, sourceTags: null, contentHash: null, lastUpdated: null, versionId: null },
      [stateKey('Patient', 'quote"\'\\ü')]: { status: null, patientId: 'quote"\'\\ü', sourceTags: ['vip', 'a:b'], contentHash: 'h"\\', lastUpdated: '2024-05-02T00:00:00.000Z', versionId: null },
    });
    // Another workspace sees none of them.
    const other = await env.workspace();
    expect((await readResourceStates(env.db, dialect, other.workspaceId, states.keys())).size).toBe(0);

    // An update replaces the values and the delivery; null removes the state.
    const next = new Map<string, ResourceState | null>([
      [stateKey('Encounter', 'x'), { status: 'cancelled', patientId: 'p-1', sourceTags: null, contentHash: 'h-x2', lastUpdated: '2024-05-03T00:00:00.000Z', versionId: '4' }],
      [stateKey('Condition', 'y'), null],
    ]);
    await env.db.transaction().execute((tx) => writeResourceStates(tx, dialect, ws.workspaceId, next, 'd-2', at));
    const after = await readResourceStates(env.db, dialect, ws.workspaceId, [stateKey('Encounter', 'x'), stateKey('Condition', 'y')]);
    expect(Object.fromEntries(after)).toEqual({ [stateKey('Encounter', 'x')]: { status: 'cancelled', patientId: 'p-1', sourceTags: null, contentHash: 'h-x2', lastUpdated: '2024-05-03T00:00:00.000Z', versionId: '4' } });
    const row = await env.db.selectFrom('resource_states').select('delivery_id').where('workspace_id', '=', ws.workspaceId).where('resource_id', '=', 'x').executeTakeFirstOrThrow();
    expect(row.delivery_id).toBe('d-2');
    expect((await readResourceStates(env.db, dialect, ws.workspaceId, [])).size).toBe(0);
  });
});
