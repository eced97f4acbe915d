import type { IncomingMessage } from 'node:http';
import { uuidv4 } from '../../lib/ids.js';

/** 1–128 printable ASCII characters (DESIGN §2); anything else is replaced by a fresh UUID. */
const ACCEPTABLE = /^[\x21-\x7e][\x20-\x7e]{0,127}$/;

export function requestIdFrom(raw: IncomingMessage): string {
  const header = raw.headers['x-request-id'];
  const value = Array.isArray(header) ? header[0] : header;
  return value && value.length <= 128 && ACCEPTABLE.test(value) ? value : uuidv4();
}
