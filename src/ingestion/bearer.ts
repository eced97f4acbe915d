/**
 * The bearer fallback for endpoints created with `auth: "bearer"` (DESIGN §7), for sending
 * systems that cannot sign: the endpoint secret itself travels as `Authorization: Bearer <secret>`.
 * The service keeps only SHA-256 hashes of such secrets, so the presented token is hashed and the
 * digests are compared in constant time, against every active secret (two during a rotation).
 */
import { createHash, timingSafeEqual } from 'node:crypto';

const BEARER = /^Bearer[ \t]+(\S{1,512})[ \t]*$/i;
const HEX_SHA256 = /^[0-9a-f]{64}$/;

export type BearerCheck = { ok: true; secretIndex: number } | { ok: false; reason: 'missing_token' | 'no_matching_secret' };

/** `secretHashes`: SHA-256 hex digests of the active secrets, newest first. */
export function verifyBearer(authorization: string | string[] | undefined, secretHashes: readonly string[]): BearerCheck {
  const match = typeof authorization === 'string' ? BEARER.exec(authorization) : null;
  if (!match) return { ok: false, reason: 'missing_token' };
  const presented = createHash('sha256').update(match[1], 'utf8').digest();
  let matched = -1;
  secretHashes.forEach((hash, index) => {
    if (!HEX_SHA256.test(hash)) return;
    if (timingSafeEqual(presented, Buffer.from(hash, 'hex')) && matched < 0) matched = index;
  });
  return matched < 0 ? { ok: false, reason: 'no_matching_secret' } : { ok: true, secretIndex: matched };
}
