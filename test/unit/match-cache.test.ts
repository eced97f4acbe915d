import { describe, expect, it } from 'vitest';
import { MatchCache, matchInputs } from '../../src/modules/search/match-cache.js';
import { TagBitmap } from '../../src/modules/search/tag-bitmap.js';

function bitmap(...seqs: number[]): TagBitmap {
  const b = new TagBitmap();
  for (const seq of seqs) b.set(seq, true);
  return b;
}

const matchesOf = (positions: TagBitmap) => ({ positions, total: positions.cardinality(), everyRecord: 0, storedChunks: null });

describe('match cache', () => {
  it('hits only for the very same chunk arrays under the same key', () => {
    const cache = new MatchCache();
    const every = bitmap(1, 2, 3, 70_000);
    const odd = bitmap(1, 3);
    const inputs = matchInputs([every, odd]);
    const stored = matchesOf(bitmap(1, 3));
    cache.store('k', inputs, stored);
    expect(cache.lookup('k', matchInputs([every, odd]))).toBe(stored);
    expect(cache.lookup('other', matchInputs([every, odd]))).toBeUndefined();
    // Same bits in a new array (a new version, or a copy with a log change applied): a miss.
    const copy = new TagBitmap();
    for (const [chunk, words] of odd.chunks) copy.chunks.set(chunk, words.slice());
    expect(cache.lookup('k', matchInputs([every, copy]))).toBeUndefined();
    // A chunk gone, or moved from one tag to the next: a miss.
    const shorter = new TagBitmap();
    shorter.chunks.set(0, every.chunks.get(0)!);
    expect(cache.lookup('k', matchInputs([shorter, odd]))).toBeUndefined();
    expect(cache.lookup('k', matchInputs([odd, every]))).toBeUndefined();
  });

  it('keeps at most its bound of chunks, dropping the least recently used', () => {
    const cache = new MatchCache(2);
    const inputs = (b: TagBitmap) => matchInputs([b]);
    const a = bitmap(1), b = bitmap(2), c = bitmap(3);
    cache.store('a', inputs(a), matchesOf(a));
    cache.store('b', inputs(b), matchesOf(b));
    expect(cache.lookup('a', inputs(a))).toBeDefined(); // a is now the most recent
    cache.store('c', inputs(c), matchesOf(c));
    expect(cache.size).toBe(2);
    expect(cache.lookup('b', inputs(b))).toBeUndefined();
    expect(cache.lookup('a', inputs(a))).toBeDefined();
    expect(cache.lookup('c', inputs(c))).toBeDefined();
    // Matches larger than the whole bound are not kept at all.
    const wide = bitmap(1, 70_000, 140_000);
    cache.store('wide', inputs(wide), matchesOf(wide));
    expect(cache.lookup('wide', inputs(wide))).toBeUndefined();
  });
});
