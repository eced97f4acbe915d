/**
 * Which records carry a tag, as a bitmap over record positions (`records.seq`), split into
 * chunks of 65,536 positions like a roaring bitmap: a chunk is stored as its sorted 16-bit
 * positions while it holds fewer than 4,096 of them (2 bytes each, so fewer than 8,192 bytes)
 * and as 8,192 bytes of bits once it holds more, so a stored chunk is never bigger than 8 KiB and
 * its length alone says which form it is in. A chunk holding all 65,536 positions (common for the
 * `*` bitmap of every record) is stored as zero bytes: an empty chunk is never stored (its row is
 * deleted), so the empty value is free to mean full. In memory every chunk is 2,048 32-bit words, where
 * AND, AND NOT and counting are a few thousand word operations.
 *
 * Stored byte order is little-endian whatever the platform (positions and words alike).
 */
import { endianness } from 'node:os';

export const CHUNK_BITS = 65_536;
export const CHUNK_BYTES = CHUNK_BITS / 8;
const WORDS = CHUNK_BITS / 32;
const DENSE_BYTES = CHUNK_BYTES;
/** From this many positions on, a chunk is stored as bits (the same rule as roaring bitmaps). */
const DENSE_FROM = 4_096;
const LITTLE_ENDIAN = endianness() === 'LE';

export class TagBitmap {
  /** chunk number → its 2,048 words; a chunk that is absent holds no positions */
  readonly chunks = new Map<number, Uint32Array>();

  has(seq: number): boolean {
    const words = this.chunks.get(Math.floor(seq / CHUNK_BITS));
    if (!words) return false;
    const bit = seq % CHUNK_BITS;
    return (words[bit >>> 5] & (1 << (bit & 31))) !== 0;
  }

  set(seq: number, present: boolean): void {
    const chunk = Math.floor(seq / CHUNK_BITS);
    let words = this.chunks.get(chunk);
    if (!words) {
      if (!present) return;
      words = new Uint32Array(WORDS);
      this.chunks.set(chunk, words);
    }
    const bit = seq % CHUNK_BITS;
    if (present) words[bit >>> 5] |= 1 << (bit & 31);
    else words[bit >>> 5] &= ~(1 << (bit & 31));
  }

  /** How many positions are set. */
  cardinality(): number {
    let total = 0;
    for (const words of this.chunks.values()) total += countWords(words);
    return total;
  }

  /** Every set position, in ascending order. */
  *positions(): Generator<number> {
    for (const chunk of [...this.chunks.keys()].sort((a, b) => a - b)) {
      const words = this.chunks.get(chunk)!;
      const base = chunk * CHUNK_BITS;
      for (let w = 0; w < WORDS; w++) {
        let word = words[w];
        while (word !== 0) {
          const low = word & -word;
          yield base + w * 32 + (31 - Math.clz32(low));
          word ^= low;
        }
      }
    }
  }
}

/**
 * The records of `universe` that carry every tag of `all` and none of `none`. The result shares
 * no memory with its inputs.
 *
 * Chunk by chunk: a copy of the universe's words, then one pass per other bitmap. Each pass is a
 * loop over two typed arrays that V8 compiles tightly; the single loop it replaced, indexing an
 * array of arrays per word, took 2.5 times as long (0.9 ms for a million records and three tags).
 */
export function intersect(universe: TagBitmap, all: readonly TagBitmap[], none: readonly TagBitmap[]): TagBitmap {
  const result = new TagBitmap();
  chunks: for (const [chunk, source] of universe.chunks) {
    const required: Uint32Array[] = [];
    for (const bitmap of all) {
      const words = bitmap.chunks.get(chunk);
      if (!words) continue chunks;
      required.push(words);
    }
    const words = source.slice();
    for (const other of required) andInto(words, other);
    for (const bitmap of none) {
      const other = bitmap.chunks.get(chunk);
      if (other) andNotInto(words, other);
    }
    if (!isEmpty(words)) result.chunks.set(chunk, words);
  }
  return result;
}

function andInto(words: Uint32Array, other: Uint32Array): void {
  for (let w = 0; w < WORDS; w++) words[w] &= other[w];
}

function andNotInto(words: Uint32Array, other: Uint32Array): void {
  for (let w = 0; w < WORDS; w++) words[w] &= ~other[w];
}

function isEmpty(words: Uint32Array): boolean {
  for (let w = 0; w < WORDS; w++) if (words[w] !== 0) return false;
  return true;
}

/** A chunk's 8,192 bytes of bits, little-endian (bit n is bit n % 8 of byte n / 8). */
export function chunkBytes(words: Uint32Array): Uint8Array {
  if (LITTLE_ENDIAN) return new Uint8Array(words.buffer, words.byteOffset, DENSE_BYTES);
  const bytes = new Uint8Array(DENSE_BYTES);
  const view = new DataView(bytes.buffer);
  for (let w = 0; w < WORDS; w++) view.setUint32(w * 4, words[w], true);
  return bytes;
}

/** A chunk as stored, or null when it holds no position (its row is then deleted). */
export function encodeChunk(words: Uint32Array): Uint8Array | null {
  const count = countWords(words);
  if (count === 0) return null;
  if (count === CHUNK_BITS) return new Uint8Array(0);
  if (count >= DENSE_FROM) return chunkBytes(words).slice();
  const bytes = new Uint8Array(count * 2);
  const view = new DataView(bytes.buffer);
  let at = 0;
  for (let w = 0; w < WORDS; w++) {
    let word = words[w];
    while (word !== 0) {
      const low = word & -word;
      view.setUint16(at, w * 32 + (31 - Math.clz32(low)), true);
      at += 2;
      word ^= low;
    }
  }
  return bytes;
}

/** A stored chunk back into words. */
export function decodeChunk(bytes: Uint8Array): Uint32Array {
  const words = new Uint32Array(WORDS);
  if (bytes.byteLength === 0) return words.fill(0xffffffff);
  if (bytes.byteLength === DENSE_BYTES) {
    if (LITTLE_ENDIAN) new Uint8Array(words.buffer).set(bytes);
    else {
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      for (let w = 0; w < WORDS; w++) words[w] = view.getUint32(w * 4, true);
    }
    return words;
  }
  if (bytes.byteLength % 2 !== 0 || bytes.byteLength > DENSE_BYTES) {
    throw new Error(`a tag bitmap chunk of ${bytes.byteLength} bytes is neither bits nor positions`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = 0; at < bytes.byteLength; at += 2) {
    const bit = view.getUint16(at, true);
    words[bit >>> 5] |= 1 << (bit & 31);
  }
  return words;
}

function countWords(words: Uint32Array): number {
  let total = 0;
  for (let w = 0; w < WORDS; w++) {
    let v = words[w];
    if (v === 0) continue;
    // Population count of a 32-bit word (Hacker's Delight, figure 5-2).
    v = v - ((v >>> 1) & 0x55555555);
    v = (v & 0x33333333) + ((v >>> 2) & 0x33333333);
    total += Math.imul((v + (v >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24;
  }
  return total;
}
