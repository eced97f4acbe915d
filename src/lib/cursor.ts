import { sql, type RawBuilder } from 'kysely';
import { ApiError } from './errors.js';
import { isUuid } from './ids.js';

/**
 * Opaque keyset cursors: base64url of a one-item JSON array, the id of the last item sent.
 * Keyset paging stays stable while rows are inserted (DESIGN §2).
 */
export function encodeCursor(lastId: string): string {
  return Buffer.from(JSON.stringify([lastId]), 'utf8').toString('base64url');
}

/**
 * The id a cursor carries. Anything else is refused (DESIGN §2: a bad cursor → 400), also a
 * well-formed array whose item is not an id: `["zzz"]` would otherwise sort after every id and
 * quietly answer the first page again.
 */
export function decodeCursor(cursor: string): string {
  try {
    const bytes = Buffer.from(cursor, 'base64url');
    // Node's decoder skips characters outside the alphabet and stray ends: a cursor with junk
    // after it read as the cursor. Only the exact text this service hands out is taken.
    if (bytes.toString('base64url') !== cursor) throw new Error('not canonical base64url');
    const key: unknown = JSON.parse(bytes.toString('utf8'));
    if (Array.isArray(key) && key.length === 1 && isUuid(key[0])) return key[0].toLowerCase();
  } catch {
    // fall through to the error below
  }
  throw new ApiError('invalid_cursor', 'cursor is not one this service handed out');
}

export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

/**
 * Newest-first keyset paging over a time-ordered `id` (UUID v7): applies the cursor, reads one
 * row more than the page to know whether another page follows, and maps the rows. Every list
 * endpoint pages this way, so rows inserted while a client pages never shift or repeat items.
 * Without a `limit` (the webhook list, a bare array) every row after the cursor is the page.
 */
export async function newestFirstPage<Row extends { id: string }, T>(
  select: {
    where(lhs: RawBuilder<string>, op: '<', rhs: string): typeof select;
    orderBy(ref: RawBuilder<string>, direction: 'desc'): typeof select;
    limit(n: number): typeof select;
    execute(): Promise<Row[]>;
  },
  query: { limit?: number; cursor?: string },
  toItem: (row: Row) => T,
): Promise<Page<T>> {
  let paged = select;
  if (query.cursor) paged = paged.where(sql.ref<string>('id'), '<', decodeCursor(query.cursor));
  paged = paged.orderBy(sql.ref<string>('id'), 'desc');
  if (query.limit === undefined) return { data: (await paged.execute()).map(toItem), nextCursor: null };
  const rows = await paged.limit(query.limit + 1).execute();
  const page = rows.slice(0, query.limit);
  return {
    data: page.map(toItem),
    nextCursor: rows.length > query.limit ? encodeCursor(page[page.length - 1].id) : null,
  };
}
