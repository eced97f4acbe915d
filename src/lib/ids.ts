import { randomBytes, randomUUID } from 'node:crypto';

/**
 * UUID v7 (RFC 9562): 48-bit Unix milliseconds, then random bits. Time-ordered ids keep
 * B-tree inserts at the right edge of the index (DESIGN §2), and make "newest first" a key order.
 * A counter in the random part keeps ids made in the same millisecond in creation order.
 */
let lastMs = 0;
let sequence = 0;

export function uuidv7(nowMs: number = Date.now()): string {
  if (nowMs <= lastMs) {
    nowMs = lastMs;
    sequence = (sequence + 1) & 0xfff;
    if (sequence === 0) nowMs = ++lastMs;
  } else {
    lastMs = nowMs;
    sequence = randomBytes(2).readUInt16BE(0) & 0x7ff;
  }
  const bytes = randomBytes(16);
  bytes.writeUIntBE(nowMs, 0, 6);
  bytes[6] = 0x70 | (sequence >> 8);
  bytes[7] = sequence & 0xff;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export const uuidv4 = (): string => randomUUID();

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_PATTERN.test(value);
}
