/**
 * Decoded bitmap chunks this process has read, per (workspace, type, tag) and by chunk with their
 * version, so a search reads again only the chunks rewritten since. A stored chunk's version
 * changes with every rewrite and never comes back (migration 0004), so an entry is exactly the
 * stored chunk of that version or of no further use: nothing here can be stale, only unused.
 *
 * Words are shared: whoever takes them from here must copy them before changing them. Bounded by
 * a number of chunks (at most 8 KiB each); the tags least recently read go first.
 */
export const DEFAULT_CACHED_CHUNKS = 8_192;

export interface CachedChunk {
  version: number;
  words: Uint32Array;
}

/** chunk number → the chunk as last read */
export type CachedTag = Map<number, CachedChunk>;

export class ChunkCache {
  private readonly tags = new Map<string, CachedTag>();
  private chunks = 0;

  constructor(private readonly maxChunks: number = DEFAULT_CACHED_CHUNKS) {}

  /** The cached chunks of one tag of a workspace and type, created empty if there are none. */
  tag(workspaceId: string, resourceType: string, tag: string): CachedTag {
    const key = `${workspaceId}\u0000${resourceType}\u0000${tag}`;
    let cached = this.tags.get(key);
    if (cached) this.tags.delete(key); // re-inserted below: most recently used last
    else cached = new Map();
    this.tags.set(key, cached);
    return cached;
  }

  /** Records what a read put into or took out of the tags it asked for; evicts beyond the bound. */
  settle(): void {
    this.chunks = 0;
    for (const cached of this.tags.values()) this.chunks += cached.size;
    for (const [key, cached] of this.tags) {
      if (this.chunks <= this.maxChunks) break;
      this.tags.delete(key);
      this.chunks -= cached.size;
    }
  }

  get size(): number {
    return this.chunks;
  }
}
