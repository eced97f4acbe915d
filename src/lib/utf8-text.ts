import { isUtf8 } from 'node:buffer';
import { ApiError } from './errors.js';

/**
 * Bodies are JSON in UTF-8 (RFC 8259 §8.1: JSON exchanged between systems is UTF-8), and are read
 * as such or refused. Decoded as UTF-8 regardless of what they said, a Latin-1 `José` was stored
 * as `Jos\uFFFD` with a 201 (or, in a delivery, a 202 and a damaged patient name in search): data
 * changed without a word to the sender.
 */

/** 415 for a Content-Type that names a charset other than UTF-8 (none, `utf-8` or `utf8` are fine). */
export function refuseOtherCharsets(contentType: string | undefined): void {
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)"?/i.exec(contentType ?? '')?.[1]?.toLowerCase();
  if (charset === undefined || charset === 'utf-8' || charset === 'utf8') return;
  throw new ApiError('unsupported_media_type', `bodies are JSON in UTF-8: charset=${charset.slice(0, 40)} is not taken; send UTF-8 and leave charset out (or say utf-8)`);
}

/** The body's text; 400 for bytes that are not UTF-8 (rather than replacement characters in what is stored). */
export function utf8TextOf(body: Buffer): string {
  if (!isUtf8(body)) throw new ApiError('invalid_request', 'request body is not valid UTF-8: send JSON encoded in UTF-8');
  return body.toString('utf8');
}
