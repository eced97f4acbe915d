/**
 * The matches of recent searches, by workspace, type and filters, next to the chunks they were
 * computed from, so that a search asked again (the next page of a cohort, a dashboard polling a
 * count) skips the AND / AND NOT and the counting when nothing it reads has changed.
 *
 * Why identity is enough: the chunks a search reads come from the chunk cache (chunk-cache.ts),
 * where a stored chunk of one version is one array that nobody changes; a new version is a new
 * array, and a change from the log not folded yet is applied to a copy. So when every input
 * chunk of every tag is the very array the earlier search used, the store held the same bits for
 * those tags, and the matches are the earlier matches. Anything else (a new version, a change in
 * the log, a chunk gone) is a miss, computed afresh.
 *
 * Matches are shared between the searches that hit: nobody may change their bitmap. Bounded by
 * the number of chunks held (8 KiB each); the least recently used entries go first.
 */
import type { TagBitmap } from './tag-bitmap.js';

export interface CachedMatches {
  positions: TagBitmap;
  total: number;
  everyRecord: number;
  /** The stored chunks the matches were computed from, when no logged change went into them (TagBitmapsRead). */
  storedChunks: readonly string[] | null;
}

/** The input chunks of a search: for each tag in a fixed order, its chunk numbers and arrays, then a -1. */
export type MatchInputs = (number | Uint32Array)[];

interface Entry {
  inputs: MatchInputs;
  matches: CachedMatches;
}

export const DEFAULT_MATCH_CHUNKS = 2_048;

export class MatchCache {
  private readonly entries = new Map<string, Entry>();
  private chunks = 0;

  constructor(private readonly maxChunks: number = DEFAULT_MATCH_CHUNKS) {}

  /** The matches computed from exactly these inputs under this key, if they are still held. */
  lookup(key: string, inputs: MatchInputs): CachedMatches | undefined {
    const entry = this.entries.get(key);
    return entry && sameInputs(entry.inputs, inputs) ? this.latest(key) : undefined;
  }

  /**
   * The matches last stored under this key, whatever the store holds now: for a reader that has
   * the store check them (`storedChunks`) in the statement that uses them.
   */
  latest(key: string): CachedMatches | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key); // re-inserted: most recently used last
    this.entries.set(key, entry);
    return entry.matches;
  }

  store(key: string, inputs: MatchInputs, matches: CachedMatches): void {
    const previous = this.entries.get(key);
    if (previous) {
      this.entries.delete(key);
      this.chunks -= previous.matches.positions.chunks.size;
    }
    const size = matches.positions.chunks.size;
    if (size > this.maxChunks) return;
    this.entries.set(key, { inputs, matches });
    this.chunks += size;
    for (const [oldest, entry] of this.entries) {
      if (this.chunks <= this.maxChunks) break;
      this.entries.delete(oldest);
      this.chunks -= entry.matches.positions.chunks.size;
    }
  }

  get size(): number {
    return this.entries.size;
  }
}

function sameInputs(a: MatchInputs, b: MatchInputs): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The inputs of a search over these bitmaps, tags in the given order. */
export function matchInputs(bitmaps: readonly TagBitmap[]): MatchInputs {
  const inputs: MatchInputs = [];
  for (const bitmap of bitmaps) {
    for (const [chunk, words] of bitmap.chunks) inputs.push(chunk, words);
    inputs.push(-1);
  }
  return inputs;
}
