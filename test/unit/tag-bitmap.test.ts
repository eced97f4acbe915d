import { describe, expect, it } from 'vitest';
import { CHUNK_BITS, TagBitmap, decodeChunk, encodeChunk, intersect } from '../../src/modules/search/tag-bitmap.js';

function bitmapOf(positions: number[]): TagBitmap {
  const bitmap = new TagBitmap();
  for (const seq of positions) bitmap.set(seq, true);
  return bitmap;
}

describe('tag bitmaps', () => {
  it('sets, clears, tests and counts positions across chunks, in ascending order', () => {
    const positions = [0, 1, 31, 32, 63, CHUNK_BITS - 1, CHUNK_BITS, 5 * CHUNK_BITS + 12_345];
    const bitmap = bitmapOf([...positions].reverse());
    expect(bitmap.cardinality()).toBe(positions.length);
    expect([...bitmap.positions()]).toEqual(positions);
    for (const seq of positions) expect(bitmap.has(seq)).toBe(true);
    expect(bitmap.has(2)).toBe(false);
    expect(bitmap.has(7 * CHUNK_BITS)).toBe(false);
    bitmap.set(31, false);
    bitmap.set(9 * CHUNK_BITS, false); // clearing in an absent chunk creates nothing
    expect(bitmap.has(31)).toBe(false);
    expect(bitmap.chunks.has(9)).toBe(false);
    expect(bitmap.cardinality()).toBe(positions.length - 1);
  });

  it('stores few positions as a sorted list, many as bits and all of them as nothing, and reads each back exactly', () => {
    for (const count of [1, 2, 4_095, 4_096, 30_000, CHUNK_BITS]) {
      const step = Math.floor(CHUNK_BITS / count);
      const positions = Array.from({ length: count }, (_, i) => i * step);
      const words = bitmapOf(positions).chunks.get(0)!;
      const stored = encodeChunk(words)!;
      expect(stored.byteLength).toBe(count < 4_096 ? count * 2 : count === CHUNK_BITS ? 0 : 8_192);
      expect(Array.from(decodeChunk(stored))).toEqual(Array.from(words));
    }
    expect(encodeChunk(new Uint32Array(CHUNK_BITS / 32))).toBeNull();
  });

  it('writes positions little-endian whatever the platform', () => {
    const stored = encodeChunk(bitmapOf([0x0102]).chunks.get(0)!)!;
    expect(Array.from(stored)).toEqual([0x02, 0x01]);
  });

  it('refuses a stored chunk that is neither bits nor positions', () => {
    expect(() => decodeChunk(new Uint8Array(3))).toThrow(/neither/);
    expect(() => decodeChunk(new Uint8Array(8_194))).toThrow(/neither/);
  });

  it('intersects: every record of the universe with all required tags and none of the excluded', () => {
    const universe = bitmapOf(Array.from({ length: 200 }, (_, i) => i * 1_000));
    const even = bitmapOf(Array.from({ length: 100 }, (_, i) => i * 2_000));
    const byThree = bitmapOf(Array.from({ length: 67 }, (_, i) => i * 3_000));
    const big = bitmapOf(Array.from({ length: 100 }, (_, i) => 100_000 + i * 1_000));
    const result = intersect(universe, [even], [byThree, big]);
    const expected = Array.from({ length: 200 }, (_, i) => i * 1_000).filter(
      (seq) => seq % 2_000 === 0 && seq % 3_000 !== 0 && seq < 100_000,
    );
    expect([...result.positions()]).toEqual(expected);
    expect(result.cardinality()).toBe(expected.length);
    // A required tag nobody carries matches nothing; no filters match the universe.
    expect(intersect(universe, [new TagBitmap()], []).cardinality()).toBe(0);
    expect(intersect(universe, [], []).cardinality()).toBe(200);
    // The result shares no memory with its inputs.
    result.set(0, false);
    expect(universe.has(0)).toBe(true);
  });
});

describe('the chunk cache', () => {
  it('keeps chunks per tag, and lets the tags least recently read go first past its bound', async () => {
    const { ChunkCache } = await import('../../src/modules/search/chunk-cache.js');
    const cache = new ChunkCache(3);
    const words = new Uint32Array(CHUNK_BITS / 32);
    cache.tag('ws', 'Patient', 'a').set(0, { version: 1, words });
    cache.tag('ws', 'Patient', 'b').set(0, { version: 2, words });
    cache.tag('ws', 'Patient', 'b').set(1, { version: 3, words });
    cache.settle();
    expect(cache.size).toBe(3);
    // Reading `a` again makes `b` the least recently read; one more chunk pushes `b` out whole.
    cache.tag('ws', 'Patient', 'a').set(1, { version: 4, words });
    cache.settle();
    expect(cache.size).toBe(2);
    expect([...cache.tag('ws', 'Patient', 'a').keys()]).toEqual([0, 1]);
    expect(cache.tag('ws', 'Patient', 'b').size).toBe(0);
    // Workspaces and types never share entries.
    expect(cache.tag('other', 'Patient', 'a').size).toBe(0);
    expect(cache.tag('ws', 'Pathway', 'a').size).toBe(0);
  });
});
