import { ApiError } from './errors.js';

/**
 * Opaque keyset cursors: base64url of a small JSON array (the sort key of the last item sent).
 * Keyset paging stays stable while rows are inserted (DESIGN §2).
 */
export function encodeCursor(key: readonly (string | number)[]): string {
  return Buffer.from(JSON.stringify(key), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string, arity: number): (string | number)[] {
  try {
    const key = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (
      Array.isArray(key) &&
      key.length === arity &&
      key.every((part) => typeof part === 'string' || typeof part === 'number')
    ) {
      return key;
    }
  } catch {
    // fall through to the error below
  }
  throw new ApiError('invalid_cursor', 'cursor is not one this service handed out');
}

export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}
