import canonicalize from 'canonicalize';
import { createHash } from 'node:crypto';

/** RFC 8785 canonical JSON: key order and white space do not change the text (DESIGN §4). */
export function canonicalJson(value: unknown): string {
  return (canonicalize as unknown as (v: unknown) => string | undefined)(value) ?? 'null';
}

export function sha256Hex(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** JSON columns are text in both stores; parse them back with one helper. */
export function parseJson<T>(text: string | null | undefined, fallback: T): T {
  if (text === null || text === undefined || text === '') return fallback;
  return JSON.parse(text) as T;
}
