/**
 * The signature of a webhook delivery (interface spec "Deliver data", DESIGN §7), checked in one
 * function over the raw bytes of the body, with a signer for senders and tests beside it.
 *
 * Header: `X-Service-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]`, where each v1 is
 * HMAC-SHA256, keyed with the endpoint secret (the whole `whsec_…` string, UTF-8), over
 * `<t>.<raw body>`, as lowercase hex. Several v1 values let a sender sign with the old and the new
 * secret during a rotation. Elements other than `t` and `v1` (a `v0`, a future `v2`) are ignored,
 * as are pieces without `=`, so senders can add schemes without breaking older receivers.
 *
 * Order of checks: the header's form, then the HMAC, then the time window. The window comes last
 * so that "expired" is only ever told to someone who holds the secret (a replayed old request);
 * any other failure is `invalid_signature`, whatever its cause, and the precise `reason` stays
 * on the server side (logs, tests).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'x-service-signature';

/** DESIGN §7: `t` more than 300 s in the past or in the future is refused. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

/** Longer headers are refused unread: a real one holds a handful of 64-character values. */
const MAX_HEADER_LENGTH = 4096;
/** More candidate signatures than this is not a rotation, it is someone guessing. */
const MAX_SIGNATURES = 16;
const TIMESTAMP = /^\d{1,12}$/;
const HEX_SHA256 = /^[0-9a-f]{64}$/;

export type SignatureFailureReason =
  /** no header, or only white space */
  | 'missing_header'
  /** too long, `t` given twice, or too many signatures */
  | 'malformed_header'
  | 'missing_timestamp'
  /** `t` is not a whole number of seconds */
  | 'invalid_timestamp'
  /** no `v1` element at all (a `v0` only, say) */
  | 'missing_v1'
  /** no `v1` value is 64 lower-case hex characters (empty, cut, base64, upper case) */
  | 'malformed_v1'
  /** no `v1` is the HMAC of any active secret (wrong secret, changed body, empty or cut value) */
  | 'no_matching_signature'
  /** a valid signature, but `t` is outside the window */
  | 'timestamp_outside_window';

export type SignatureCheck =
  | { ok: true; timestamp: number; secretIndex: number }
  | {
      ok: false;
      code: 'invalid_signature' | 'signature_expired';
      reason: SignatureFailureReason;
      /** `signature_expired` only: how far the signed `t` is ahead of the receiver's clock (negative: behind), in seconds */
      skewSeconds?: number;
    };

interface ParsedHeader {
  timestamp: string;
  signatures: string[];
}

function fail(reason: SignatureFailureReason): SignatureCheck {
  return { ok: false, code: reason === 'timestamp_outside_window' ? 'signature_expired' : 'invalid_signature', reason };
}

function parseHeader(header: string): ParsedHeader | SignatureFailureReason {
  if (header.length > MAX_HEADER_LENGTH) return 'malformed_header';
  let timestamp: string | undefined;
  const signatures: string[] = [];
  for (const piece of header.split(',')) {
    const at = piece.indexOf('=');
    if (at < 0) continue;
    const key = piece.slice(0, at).trim();
    const value = piece.slice(at + 1).trim();
    if (key === 't') {
      if (timestamp !== undefined) return 'malformed_header';
      timestamp = value;
    } else if (key === 'v1') {
      signatures.push(value);
    }
  }
  if (signatures.length > MAX_SIGNATURES) return 'malformed_header';
  if (timestamp === undefined) return 'missing_timestamp';
  if (!TIMESTAMP.test(timestamp)) return 'invalid_timestamp';
  if (signatures.length === 0) return 'missing_v1';
  return { timestamp, signatures };
}

function hmac(secret: string, timestamp: string, rawBody: Buffer | string): Buffer {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest();
}

/**
 * Checks a delivery's signature header against the endpoint's active secrets (newest first; two
 * during a rotation overlap). `nowSeconds` is the receiver's Unix time. Never throws on input;
 * throws only when called with a tolerance that would switch the time check off.
 */
export function verifySignature(
  header: string | string[] | undefined | null,
  rawBody: Buffer | string,
  secrets: readonly string[],
  nowSeconds: number,
  toleranceSeconds: number = SIGNATURE_TOLERANCE_SECONDS,
): SignatureCheck {
  if (!Number.isFinite(toleranceSeconds) || toleranceSeconds <= 0) {
    throw new RangeError('the signature tolerance must be a positive number of seconds');
  }
  // A header sent twice is two claims about one body: refuse rather than pick one.
  if (Array.isArray(header)) return fail('malformed_header');
  if (typeof header !== 'string' || header.trim() === '') return fail('missing_header');

  const parsed = parseHeader(header);
  if (typeof parsed === 'string') return fail(parsed);

  const candidates = parsed.signatures.filter((value) => HEX_SHA256.test(value)).map((value) => Buffer.from(value, 'hex'));
  // Its form is no secret, and a sender whose every v1 has the wrong form needs to hear so.
  if (candidates.length === 0) return fail('malformed_v1');
  let matched = -1;
  secrets.forEach((secret, index) => {
    const expected = hmac(secret, parsed.timestamp, rawBody);
    // Every candidate is compared (equal lengths, constant time): no early exit to time.
    for (const candidate of candidates) {
      if (timingSafeEqual(expected, candidate) && matched < 0) matched = index;
    }
  });
  if (matched < 0) return fail('no_matching_signature');

  const timestamp = Number(parsed.timestamp);
  if (Math.abs(nowSeconds - timestamp) > toleranceSeconds) {
    return { ok: false, code: 'signature_expired', reason: 'timestamp_outside_window', skewSeconds: timestamp - nowSeconds };
  }
  return { ok: true, timestamp, secretIndex: matched };
}

/**
 * The header value a sender puts in `X-Service-Signature` for this body, signed now or at `t`.
 * Shipped for integrators and used by this service's own tests.
 */
export function signPayload(secret: string, rawBody: Buffer | string, t: number = Math.floor(Date.now() / 1000)): string {
  if (!Number.isInteger(t) || t < 0) throw new RangeError('t must be a whole number of Unix seconds');
  return `t=${t},v1=${hmac(secret, String(t), rawBody).toString('hex')}`;
}
