import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../lib/json.js';

/**
 * API keys look like `cpk_<environment>_<43 base62 characters>` (DESIGN §3): the prefix lets
 * secret scanners spot a leaked key, 43 base62 characters carry about 256 bits. Only the SHA-256
 * hash is stored; a high-entropy key needs no slow hash, and a fast one keeps lookups cheap.
 */
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_PATTERN = /^cpk_(staging|production)_[0-9A-Za-z]{43}$/;

export function generateApiKey(environment: 'staging' | 'production'): string {
  let body = '';
  while (body.length < 43) {
    for (const byte of randomBytes(64)) {
      // 248 = 4 × 62: dropping bytes above it keeps every character equally likely.
      if (byte < 248 && body.length < 43) body += BASE62[byte % 62];
    }
  }
  return `cpk_${environment}_${body}`;
}

export function looksLikeApiKey(text: string): boolean {
  return KEY_PATTERN.test(text);
}

export function hashApiKey(key: string): string {
  return sha256Hex(key);
}
