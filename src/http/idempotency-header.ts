import type { FastifyRequest } from 'fastify';
import { invalidRequest } from '../lib/errors.js';

/**
 * The request's `Idempotency-Key` header. Node joins a header sent twice into one value
 * ("a, b"), which became a key neither copy named: the same retry with the headers in another
 * order was a new run. Two of them are refused instead (400), whatever they hold.
 */
export function idempotencyKeyHeader(request: FastifyRequest): string | undefined {
  const value = request.headers['idempotency-key'];
  if (value === undefined) return undefined;
  // rawHeaders lists each header as sent, name then value (also under light-my-request's inject).
  const { rawHeaders } = request.raw;
  let sent = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i].toLowerCase() === 'idempotency-key') sent++;
  if (sent > 1 || Array.isArray(value)) throw invalidRequest('send one Idempotency-Key header, not several');
  return value;
}
