import { describe, expect, it } from 'vitest';
import { ParsedHandoff, parsedHandoffFor } from '../../src/modules/deliveries/parsed-handoff.js';
import type { DeliveryDigest } from '../../src/ingestion/delivery-digest.js';
import type { DeliveryRow } from '../../src/modules/deliveries/delivery.repository.js';

/** One digest (on its way from the reader) per delivery id: the handoff passes it on as it is. */
const digests = new Map<string, Promise<DeliveryDigest>>();
const parsed = (id: string): Promise<DeliveryDigest> => {
  let digest = digests.get(id);
  if (!digest) {
    const facts = { kind: 'resource', index: 0, resourceType: 'Patient', id, deleted: false, status: null, patientId: id, record: null, json: '{}', contentHash: 'h', lastUpdated: null, versionId: null } as const;
    digest = Promise.resolve({ items: [facts], problems: [] });
    digests.set(id, digest);
  }
  return digest;
};

describe('digests of read bodies handed from the intake to a processor in the same process', () => {
  it('keeps nothing while no processor runs here (an API-only process)', () => {
    const handoff = new ParsedHandoff(1000);
    handoff.offer('d1', parsed('a'), 10);
    expect(handoff.size).toBe(0);
    expect(handoff.take('d1')).toBeUndefined();
  });

  it('hands each digest over once, and forgets all when the last processor stops', () => {
    const handoff = new ParsedHandoff(1000);
    handoff.attach();
    handoff.attach();
    handoff.offer('d1', parsed('a'), 10);
    handoff.offer('d2', parsed('b'), 10);
    expect(handoff.take('d1')).toBe(parsed('a'));
    expect(handoff.take('d1')).toBeUndefined();
    handoff.detach();
    expect(handoff.has('d2')).toBe(true);
    handoff.detach();
    expect(handoff.size).toBe(0);
    expect(handoff.active).toBe(false);
  });

  it('is bounded by body bytes: the oldest make room, a body over the bound is never kept', () => {
    const handoff = new ParsedHandoff(100);
    handoff.attach();
    handoff.offer('d1', parsed('a'), 40);
    handoff.offer('d2', parsed('b'), 40);
    handoff.offer('d3', parsed('c'), 40);
    expect([handoff.has('d1'), handoff.has('d2'), handoff.has('d3')]).toEqual([false, true, true]);
    handoff.offer('huge', parsed('d'), 101);
    expect(handoff.has('huge')).toBe(false);
    // Taking frees its bytes: two more fit without evicting anything else.
    handoff.take('d2');
    handoff.offer('d4', parsed('e'), 60);
    expect([handoff.has('d3'), handoff.has('d4')]).toEqual([true, true]);
  });

  it('hands deliveries claimed at intake to their processor once, oldest first, and forgets them when it stops', () => {
    const handoff = new ParsedHandoff(50);
    const claimant = { owner: 'p1', leaseMs: 1000 };
    expect(handoff.claimant).toBeUndefined();
    handoff.attach(claimant);
    expect(handoff.claimant).toBe(claimant);
    const row = (id: string) => ({ id, lease_owner: 'p1', body: '{"big": true}' }) as unknown as DeliveryRow;
    handoff.offerClaimed(row('d1'), parsed('a'), 40);
    handoff.offerClaimed(row('d2'), parsed('b'), 40);
    // The digest of d1 made room for d2's; the claimed row stays (its body is read from the store).
    expect([handoff.has('d1'), handoff.has('d2')]).toEqual([false, true]);
    expect(handoff.takeClaimed('other', 10)).toEqual([]);
    const [first] = handoff.takeClaimed('p1', 1);
    expect(first).toMatchObject({ id: 'd1', body: null });
    expect(handoff.claimedFor('p1')).toEqual(['d2']);
    expect(handoff.take('d2')).toBe(parsed('b'));
    handoff.detach(claimant);
    expect(handoff.claimant).toBeUndefined();
    expect(handoff.claimedFor('p1')).toEqual([]);
  });

  it('is one per store handle', () => {
    const a = {};
    const b = {};
    expect(parsedHandoffFor(a)).toBe(parsedHandoffFor(a));
    expect(parsedHandoffFor(a)).not.toBe(parsedHandoffFor(b));
  });
});
