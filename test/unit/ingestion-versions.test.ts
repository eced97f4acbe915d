import { describe, expect, it } from 'vitest';
import { isOlderVersion, utcInstant, versionOf } from '../../src/ingestion/resource-version.js';
import { parseDeliveryBody } from '../../src/ingestion/delivery-body.js';
import { changesOf, stateKey, type ResourceState } from '../../src/ingestion/resource-changes.js';
import type { ResourceFacts } from '../../src/ingestion/delivery-digest.js';

describe('versionOf', () => {
  it('reads meta.lastUpdated as a UTC instant to the digit and meta.versionId as given', () => {
    expect(versionOf({ meta: { lastUpdated: '2024-03-01T10:00:00+01:00', versionId: '7' } })).toEqual({ lastUpdated: '2024-03-01T09:00:00.000000000Z', versionId: '7' });
    expect(versionOf({ meta: { lastUpdated: '2024-03-01T09:00:00.123456Z' } })).toEqual({ lastUpdated: '2024-03-01T09:00:00.123456000Z', versionId: null });
  });

  it('keeps digits past the millisecond, and takes a leap second as the end of the second before', () => {
    // Milliseconds alone made these one instant, and the older version was applied over the newer.
    const newer = utcInstant('2024-03-01T09:00:00.123456Z')!;
    const older = utcInstant('2024-03-01T09:00:00.1234Z')!;
    expect(older < newer).toBe(true);
    expect(utcInstant('2024-03-01T14:30:00.1234567+05:30')).toBe('2024-03-01T09:00:00.123456700Z');
    expect(utcInstant('2016-12-31T23:59:60Z')).toBe('2016-12-31T23:59:59.999999999Z');
    expect(utcInstant('2016-12-31T23:59:60Z')! > utcInstant('2016-12-31T23:59:59.5Z')!).toBe(true);
    expect(utcInstant('2024-03-01')).toBeNull();
    expect(utcInstant('2024-03-01T09:00:00')).toBeNull();
  });

  it('gives a DELETE of a history bundle the version in its response', () => {
    const { items } = parseDeliveryBody({
      resourceType: 'Bundle',
      type: 'history',
      entry: [
        { request: { method: 'DELETE', url: 'Encounter/e1' }, response: { status: '204', lastModified: '2024-05-02T08:00:00Z', etag: 'W/"2"' } },
        { request: { method: 'DELETE', url: 'Encounter/e2' }, response: { status: '204' } },
      ],
    });
    expect(items.map((item) => (item.kind === 'resource' ? versionOf(item.resource) : null))).toEqual([
      { lastUpdated: null, versionId: null },
      { lastUpdated: '2024-05-02T08:00:00.000000000Z', versionId: '2' },
    ]);
  });

  it('gives nulls for what is absent or not a version', () => {
    expect(versionOf({})).toEqual({ lastUpdated: null, versionId: null });
    expect(versionOf({ meta: null })).toEqual({ lastUpdated: null, versionId: null });
    expect(versionOf({ meta: { lastUpdated: 'yesterday', versionId: 3 } })).toEqual({ lastUpdated: null, versionId: null });
    expect(versionOf({ meta: { versionId: 'x'.repeat(65) } })).toEqual({ lastUpdated: null, versionId: null });
  });
});

describe('isOlderVersion', () => {
  const v = (lastUpdated: string | null, versionId: string | null = null) => ({ lastUpdated, versionId });

  it('orders by lastUpdated when both have one and they differ', () => {
    expect(isOlderVersion(v('2024-01-01T00:00:00.000Z', '9'), v('2024-01-02T00:00:00.000Z', '1'))).toBe(true);
    expect(isOlderVersion(v('2024-01-03T00:00:00.000Z', '1'), v('2024-01-02T00:00:00.000Z', '9'))).toBe(false);
  });

  it('falls back to whole-number versionIds when the instants are equal or missing', () => {
    expect(isOlderVersion(v('2024-01-01T00:00:00.000Z', '2'), v('2024-01-01T00:00:00.000Z', '10'))).toBe(true);
    expect(isOlderVersion(v(null, '2'), v('2024-01-01T00:00:00.000Z', '3'))).toBe(true);
    expect(isOlderVersion(v(null, '3'), v(null, '3'))).toBe(false);
    expect(isOlderVersion(v(null, '4'), v(null, '3'))).toBe(false);
  });

  it('never calls a version older when it cannot be ordered', () => {
    expect(isOlderVersion(v(null), v('2024-01-01T00:00:00.000Z'))).toBe(false);
    expect(isOlderVersion(v('2024-01-01T00:00:00.000Z'), v(null))).toBe(false);
    expect(isOlderVersion(v(null, 'a1'), v(null, 'b2'))).toBe(false);
    expect(isOlderVersion(v(null, '1'), v(null, 'W/"2"'))).toBe(false);
  });
});

function encounter(id: string, status: string, lastUpdated: string | null, index = 0, versionId: string | null = null): ResourceFacts {
  return {
    kind: 'resource',
    index,
    resourceType: 'Encounter',
    id,
    deleted: false,
    status,
    patientId: 'p1',
    record: null,
    json: JSON.stringify({ resourceType: 'Encounter', id, status, meta: { lastUpdated, versionId } }),
    contentHash: `${status}-${lastUpdated}-${versionId}`,
    lastUpdated,
    versionId,
  };
}

const deletion = (resourceType: string, id: string, index = 0): ResourceFacts => ({
  kind: 'resource',
  index,
  resourceType,
  id,
  deleted: true,
  status: null,
  patientId: null,
  record: null,
  json: JSON.stringify({ resourceType, id }),
  contentHash: null,
  lastUpdated: null,
  versionId: null,
});

const stored = (state: Partial<ResourceState>): ResourceState => ({
  status: null,
  patientId: 'p1',
  sourceTags: null,
  contentHash: 'stored',
  lastUpdated: null,
  versionId: null,
  ...state,
});

describe('changesOf: versions and deletions', () => {
  it('does not apply a late older version: no event, no state change, listed as skipped', () => {
    const key = stateKey('Encounter', 'e1');
    const states = new Map([[key, stored({ status: 'finished', lastUpdated: '2024-01-03T00:00:00.000Z' })]]);
    const changes = changesOf([encounter('e1', 'in-progress', '2024-01-02T00:00:00.000Z', 4)], states);
    expect(changes.events).toEqual([]);
    expect(changes.states.size).toBe(0);
    expect(changes.referencedPatients.size).toBe(0);
    expect(changes.stale).toEqual([{ index: 4, message: 'Encounter not applied: a newer version of it is stored (its meta.lastUpdated or meta.versionId is older)' }]);
  });

  it('applies a newer version and keeps its version in the state', () => {
    const key = stateKey('Encounter', 'e1');
    const states = new Map([[key, stored({ status: 'in-progress', lastUpdated: '2024-01-02T00:00:00.000Z' })]]);
    const changes = changesOf([encounter('e1', 'finished', '2024-01-03T00:00:00.000Z', 0, '3')], states);
    expect(changes.events.map((e) => e.event)).toEqual(['Encounter.updated', 'Encounter.finished']);
    expect(changes.states.get(key)).toMatchObject({ status: 'finished', lastUpdated: '2024-01-03T00:00:00.000Z', versionId: '3' });
    expect(changes.stale).toEqual([]);
  });

  it('within one delivery, a version older than one before it is skipped too (a history replayed)', () => {
    const changes = changesOf(
      [encounter('e1', 'finished', '2024-01-03T00:00:00.000Z', 0, '3'), encounter('e1', 'in-progress', '2024-01-02T00:00:00.000Z', 1, '2')],
      new Map(),
    );
    expect(changes.events.map((e) => e.event)).toEqual(['Encounter.created', 'Encounter.finished']);
    expect(changes.stale.map((s) => s.index)).toEqual([1]);
    expect(changes.states.get(stateKey('Encounter', 'e1'))).toMatchObject({ status: 'finished', versionId: '3' });
  });

  it('takes a resource without a version as it comes, and one after a state stored without one', () => {
    const key = stateKey('Encounter', 'e1');
    const noVersion = changesOf([encounter('e1', 'planned', null)], new Map([[key, stored({ status: 'finished', lastUpdated: '2024-01-03T00:00:00.000Z' })]]));
    expect(noVersion.events.map((e) => e.event)).toEqual(['Encounter.updated', 'Encounter.planned']);
    const before = changesOf([encounter('e1', 'planned', '2020-01-01T00:00:00.000Z')], new Map([[key, stored({ status: 'finished' })]]));
    expect(before.stale).toEqual([]);
  });

  it('does not apply an older deletion: a history page replayed after a newer version', () => {
    const key = stateKey('Encounter', 'e1');
    const states = new Map([[key, stored({ status: 'in-progress', lastUpdated: '2024-01-03T00:00:00.000000000Z', versionId: '3' })]]);
    const olderDeletion = { ...deletion('Encounter', 'e1', 2), lastUpdated: '2024-01-02T00:00:00.000000000Z', versionId: '2' };
    const changes = changesOf([olderDeletion], states);
    expect(changes.events).toEqual([]);
    expect(changes.states.size).toBe(0);
    expect(changes.stale).toEqual([{ index: 2, message: 'Encounter deletion not applied: a newer version of it is stored (its response.lastModified or etag is older)' }]);
    // A newer one, or one without a version (a transaction's DELETE), deletes.
    expect(changesOf([{ ...olderDeletion, versionId: '4', lastUpdated: null }], states).events.map((e) => e.event)).toEqual(['Encounter.deleted']);
    expect(changesOf([deletion('Encounter', 'e1')], states).events.map((e) => e.event)).toEqual(['Encounter.deleted']);
  });

  it('keeps the version a deletion deleted, and takes that version or an older one delivered late as late: not stored again', () => {
    const key = stateKey('Encounter', 'e1');
    const v2 = '2024-01-02T00:00:00.000000000Z';
    const deleted = changesOf([deletion('Encounter', 'e1')], new Map([[key, stored({ status: 'in-progress', lastUpdated: v2, versionId: '2' })]]));
    expect(deleted.events.map((e) => e.event)).toEqual(['Encounter.deleted']);
    const tombstone = deleted.states.get(key)!;
    expect(tombstone).toEqual({ status: null, patientId: null, sourceTags: null, contentHash: null, lastUpdated: v2, versionId: '2', deleted: true });
    const after = new Map([[key, tombstone]]);
    // The version deleted, or an older one, comes late: skipped and listed, no event, no state.
    for (const late of [encounter('e1', 'in-progress', v2, 3, '2'), encounter('e1', 'planned', '2024-01-01T00:00:00.000Z', 3, '1')]) {
      const changes = changesOf([late], after);
      expect(changes.events).toEqual([]);
      expect(changes.states.size).toBe(0);
      expect(changes.stale).toEqual([{ index: 3, message: 'Encounter not applied: it was deleted, and this is the version deleted or an older one (its meta.lastUpdated or meta.versionId)' }]);
    }
    // A newer version is the resource made again: created, as for one never seen.
    const again = changesOf([encounter('e1', 'planned', '2024-01-05T00:00:00.000Z', 0, '5')], after);
    expect(again.events.map((e) => e.event)).toEqual(['Encounter.created', 'Encounter.planned']);
    expect(again.states.get(key)).toMatchObject({ status: 'planned', versionId: '5' });
    expect(again.states.get(key)!.deleted).toBeUndefined();
    // One that cannot be ordered against it (no version at all) is applied as it comes.
    expect(changesOf([encounter('e1', 'planned', null)], after).events.map((e) => e.event)).toEqual(['Encounter.created', 'Encounter.planned']);
    // A DELETE of it again deletes nothing and raises nothing; the tombstone keeps the newer version.
    const twice = changesOf([deletion('Encounter', 'e1')], after);
    expect(twice.events).toEqual([]);
    expect(twice.stale).toEqual([]);
    expect(twice.states.get(key)).toEqual(tombstone);
    const newer = changesOf([{ ...deletion('Encounter', 'e1'), versionId: '4' }], after);
    expect(newer.states.get(key)).toMatchObject({ versionId: '4', deleted: true });
    expect(changesOf([{ ...deletion('Encounter', 'e1'), versionId: '1' }], after).states.get(key)).toEqual(tombstone);
  });

  it('keeps both versions in a tombstone when the deletion\'s cannot be ordered against the stored one', () => {
    const key = stateKey('Encounter', 'e1');
    const v2 = '2024-01-02T00:00:00.000000000Z';
    const deleted = changesOf([{ ...deletion('Encounter', 'e1'), versionId: '2' }], new Map([[key, stored({ status: 'in-progress', lastUpdated: v2 })]]));
    expect(deleted.states.get(key)).toMatchObject({ lastUpdated: v2, versionId: '2', deleted: true });
    expect(changesOf([encounter('e1', 'in-progress', v2)], new Map([[key, deleted.states.get(key)!]])).stale.map((s) => s.index)).toEqual([0]);
  });

  it('raises deleted only for a resource that is stored', () => {
    const key = stateKey('Observation', 'o1');
    const existing = changesOf([deletion('Observation', 'o1')], new Map([[key, stored({ status: 'final' })]]));
    expect(existing.events.map((e) => e.event)).toEqual(['Observation.deleted']);
    // A tombstone without a version: it orders nothing, but says the resource is deleted.
    const versionless = { status: null, patientId: null, sourceTags: null, contentHash: null, lastUpdated: null, versionId: null, deleted: true };
    expect(existing.states.get(key)).toEqual(versionless);
    // Deleted already, or never delivered: nothing to delete, no event.
    const unknown = changesOf([deletion('Observation', 'o1')], new Map());
    expect(unknown.events).toEqual([]);
    expect(unknown.states.get(key)).toBeNull();
    // What comes after a versionless tombstone is applied as it comes: created.
    expect(changesOf([encounter('o1', 'final', null)], new Map([[stateKey('Encounter', 'o1'), existing.states.get(key)!]])).events.map((e) => e.event)).toEqual(['Encounter.created', 'Encounter.final']);
    // Created and deleted in one delivery: both events.
    const both = changesOf([encounter('e9', 'planned', null, 0), deletion('Encounter', 'e9', 1)], new Map());
    expect(both.events.map((e) => e.event)).toEqual(['Encounter.created', 'Encounter.planned', 'Encounter.deleted']);
  });
});
