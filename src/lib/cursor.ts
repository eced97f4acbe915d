import { sql, type RawBuilder } from 'kysely';
import { ApiError } from './errors.js';
import { isUuid } from './ids.js';

/**
 * Opaque keyset cursors: base64url of a JSON array, the id of the last item sent and the list it
 * came from (`runs`, `triggers`, …). Keyset paging stays stable while rows are inserted (DESIGN §2).
 */
export function encodeCursor(lastId: string, list: string): string {
  return Buffer.from(JSON.stringify([lastId, list]), 'utf8').toString('base64url');
}

/**
 * The id a cursor of `list` carries. Anything else is refused (DESIGN §2: a bad cursor → 400):
 * a well-formed array whose item is not an id (`["zzz"]` would sort after every id and quietly
 * answer the first page again), and a cursor of another list (a diagrams cursor sent to
 * `/v1/triggers` answered an empty page, or another list's slice, as if it were one of its own).
 * A cursor of one item, the id alone, is one handed out before cursors named their list; one
 * with items after the list's name is one a newer version handed out (its extra items unread
 * here), so that during a rolling upgrade a client paging through a load balancer is not
 * refused by the old processes (an upgrade review: the list's name, added 2026-11-27, made
 * every old process refuse the new cursors).
 */
export function decodeCursor(cursor: string, list: string): string {
  try {
    const bytes = Buffer.from(cursor, 'base64url');
    // Node's decoder skips characters outside the alphabet and stray ends: a cursor with junk
    // after it read as the cursor. Only the exact text this service hands out is taken.
    if (bytes.toString('base64url') !== cursor) throw new Error('not canonical base64url');
    const key: unknown = JSON.parse(bytes.toString('utf8'));
    const ofThisList = Array.isArray(key) && (key.length === 1 || (key.length >= 2 && key[1] === list));
    if (ofThisList && isUuid(key[0])) return key[0].toLowerCase();
  } catch {
    // fall through to the error below
  }
  throw new ApiError('invalid_cursor', 'cursor is not one this list handed out');
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
 * `list` names the list in its cursors, which no other list takes. `idColumn` is the column the
 * keyset reads, `id` unless a list reads its rows through another table that holds the same ids
 * in its index (the audit list by record: `r.event_id`, the id of the row it joins).
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
  list: string,
  idColumn = 'id',
): Promise<Page<T>> {
  const id = sql.ref<string>(idColumn);
  let paged = select;
  if (query.cursor) paged = paged.where(id, '<', decodeCursor(query.cursor, list));
  paged = paged.orderBy(id, 'desc');
  if (query.limit === undefined) return { data: (await paged.execute()).map(toItem), nextCursor: null };
  const rows = await paged.limit(query.limit + 1).execute();
  const page = rows.slice(0, query.limit);
  return {
    data: page.map(toItem),
    nextCursor: rows.length > query.limit ? encodeCursor(page[page.length - 1].id, list) : null,
  };
}
