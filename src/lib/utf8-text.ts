import { isUtf8 } from 'node:buffer';
import { ApiError } from './errors.js';

/**
 * Bodies are JSON in UTF-8 (RFC 8259 §8.1: JSON exchanged between systems is UTF-8), and are read
 * as such or refused. Decoded as UTF-8 regardless of what they said, a Latin-1 `José` was stored
 * as `Jos\uFFFD` with a 201 (or, in a delivery, a 202 and a damaged patient name in search): data
 * changed without a word to the sender.
 */

/** A media type's parameters, name (lower case) and value (unquoted), in order (RFC 9110 §5.6.6). */
function parametersOf(contentType: string): [string, string][] {
  const parameters: [string, string][] = [];
  const parameter = /;\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;\s]*)\s*/g;
  for (const [, name, raw] of contentType.matchAll(parameter)) {
    const value = raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw;
    parameters.push([name.toLowerCase(), value]);
  }
  return parameters;
}

/**
 * 415 for a Content-Type that names a charset other than UTF-8 (none, `utf-8` or `utf8` are
 * fine), or names one twice: read from its parameters, so `charset` inside another parameter's
 * quoted value is not one, and two are refused whatever their order.
 */
export function refuseOtherCharsets(contentType: string | undefined): void {
  const charsets = parametersOf(contentType ?? '').filter(([name]) => name === 'charset').map(([, value]) => value.trim().toLowerCase());
  if (charsets.length > 1) throw new ApiError('unsupported_media_type', 'Content-Type names charset more than once; send UTF-8 and name it once, or not at all');
  const [charset] = charsets;
  if (charset === undefined || charset === 'utf-8' || charset === 'utf8') return;
  throw new ApiError('unsupported_media_type', `bodies are JSON in UTF-8: charset=${charset.slice(0, 40)} is not taken; send UTF-8 and leave charset out (or say utf-8)`);
}

/** The body's text; 400 for bytes that are not UTF-8 (rather than replacement characters in what is stored). */
export function utf8TextOf(body: Buffer): string {
  if (!isUtf8(body)) throw new ApiError('invalid_request', 'request body is not valid UTF-8: send JSON encoded in UTF-8');
  return body.toString('utf8');
}
