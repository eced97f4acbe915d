/**
 * PostgreSQL: a page of a search in ONE statement, and with it, when asked, the search's audit row.
 *
 * The match bitmap goes along as a `bytea` parameter (the chunks between the first and the last
 * match); the order index (which carries `seq`) is read in order, an entry kept when its bit is
 * set, until the page is full; then the page's records are read, each with its tags. No walked
 * position travels to the service.
 *
 * The audit row is a data-modifying CTE over the same page, so the ids it lists are exactly the
 * ids returned, in the same order, and so is its index by record (`audit_event_records`, one row
 * per id of the page, from the same page rows, and for a search of Pathway records one per
 * patient of the runs listed, `namesRunSubjects`: no round trip, no work per id in the service).
 * Both commit with the statement: the statement answers only
 * once the row is durably written, and if the row cannot be written the statement fails and
 * returns no hits. This saves the separate INSERT and its round trip (about 1 ms of a 5 ms page).
 *
 * The statements are named (storage/postgres-statement.ts): one text per order, direction,
 * whether it audits, and a bucket of `offset + limit` written into the text as the walk's LIMIT
 * (the page is then the rows numbered past the offset). With a LIMIT the planner can read, the
 * generic plan prices like the custom ones and PostgreSQL keeps it after five calls; with
 * `LIMIT $n` it took the limit for a tenth of the table and planned every call afresh, copying
 * the 128 KiB match bitmap into each plan: 3.67 against 2.98 ms a page at p50 (a million
 * records, 280 alternating calls). Buckets keep the statements per connection few (at most 13
 * per order, direction and audit); a bucket above `offset + limit` walks a little further than
 * needed, and the common limits (10, 20, 50, 100, 200, 500 from offset 0) are buckets themselves.
 */
import type { DbOrTx } from '../../storage/database.js';
import { runPostgres, type PostgresStatement } from '../../storage/postgres-statement.js';
import { CHUNK_BITS, CHUNK_BYTES, chunkBytes, type TagBitmap } from './tag-bitmap.js';
import { hitOf, type HitRow } from './hit-rows.js';
import type { AuditRowAroundIds } from './search-audit.js';
import { MAX_OFFSET, MAX_SEARCH_LIMIT, type ResourceType, type SearchHit } from './search.schemas.js';

/** The match bitmap as one run of bytes from `base` on, as PostgreSQL's `get_bit` reads it. */
export interface MatchWindow {
  base: number;
  end: number;
  bits: Buffer;
}

/** At most this many chunks (8 KiB each) go to the store as one parameter. */
const WINDOW_CHUNKS_MAX = 128;

/** The window of `positions`, or null when it is empty or too wide to send. */
export function matchWindow(positions: TagBitmap): MatchWindow | null {
  const chunks = [...positions.chunks.keys()];
  if (chunks.length === 0) return null;
  const first = Math.min(...chunks);
  const last = Math.max(...chunks);
  if (last - first + 1 > WINDOW_CHUNKS_MAX) return null;
  const bits = Buffer.alloc((last - first + 1) * CHUNK_BYTES);
  // get_bit numbers bit n as bit n % 8 of byte n / 8: the little-endian layout of the words.
  for (const [chunk, words] of positions.chunks) bits.set(chunkBytes(words), (chunk - first) * CHUNK_BYTES);
  return { base: first * CHUNK_BITS, end: (last + 1) * CHUNK_BITS, bits };
}

export type OrderColumn = 'name' | 'created_at' | 'updated_at' | 'ext_id';

export interface WalkQuery {
  workspaceId: string;
  resourceType: ResourceType;
  column: OrderColumn;
  direction: 'asc' | 'desc';
  limit: number;
  offset: number;
}

/**
 * What the matches were computed from (search.repository.ts `findUnchangedPage`): the tags read
 * (`*` among them) and every chunk stored for them then, as `tag|chunk|version`. Given, the
 * statement walks only if the store holds exactly those chunks and no logged change to the tags.
 */
export interface UnchangedSince {
  tags: readonly string[];
  storedChunks: readonly string[];
}

export async function walkInStore(
  db: DbOrTx,
  query: WalkQuery,
  window: MatchWindow,
  audit?: AuditRowAroundIds,
  unchanged?: UnchangedSince,
): Promise<SearchHit[]> {
  const values: unknown[] = [query.workspaceId, query.resourceType, window.base, window.end, window.bits, query.limit, query.offset];
  if (audit) {
    const { row } = audit;
    values.push(
      row.id,
      row.tenant_id,
      row.workspace_id,
      row.at,
      row.action,
      row.request_id,
      row.key_id,
      row.key_name,
      row.resource_type,
      row.resource_id,
      row.outcome,
      audit.detailsBefore,
      audit.detailsAfter,
    );
  }
  if (unchanged) values.push(unchanged.tags, unchanged.storedChunks);
  const statement = statementFor(query.column, query.direction, audit !== undefined, unchanged !== undefined, walkBucket(query.offset, query.limit));
  const rows = await runPostgres<HitRow>(db, statement, values);
  return rows.map(hitOf);
}

const statements = new Map<string, PostgresStatement>();

/** How far a walk reads, written into its statement: the smallest at or above `offset + limit`. */
const WALK_BUCKETS = [10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, MAX_OFFSET + MAX_SEARCH_LIMIT];

export function walkBucket(offset: number, limit: number): number {
  const needed = offset + limit;
  const bucket = WALK_BUCKETS.find((size) => size >= needed);
  if (bucket === undefined) throw new Error(`a walk of ${needed} rows is beyond the search bounds`);
  return bucket;
}

function statementFor(column: OrderColumn, direction: 'asc' | 'desc', audited: boolean, checked: boolean, bucket: number): PostgresStatement {
  const name = `carepath_search_walk_${column}_${direction}${audited ? '_audited' : ''}${checked ? '_checked' : ''}_${bucket}_v4`;
  let statement = statements.get(name);
  if (!statement) {
    statement = { name, text: walkText(column, direction, audited, checked, bucket) };
    statements.set(name, statement);
  }
  return statement;
}

/**
 * $1 workspace, $2 resource type, $3–$5 the match window, $6 limit, $7 offset; audited, $8–$18 the
 * audit row's columns and $19, $20 its details around the ids; checked, then the tags and the
 * stored chunks of UnchangedSince. `n` numbers the walked matches in their order (the index's
 * order, so numbering it sorts nothing); the page is those numbered past the offset, and its
 * hits and ids are ordered alike by integers instead of comparing sort keys again.
 *
 * Checked, `unchanged` is true when the tags' stored chunks are exactly the ones given (as many,
 * and none other) and the log holds no change to the tags; false gates the walk (the index is
 * not read) and the audit row (HAVING: no row at all), and the statement returns no hits. The
 * index rows are the page's, so they are written exactly when the audit row is: a page with
 * rows passed the check and is not empty. An empty page writes no row either: the caller takes it for a store that moved on and reads the
 * long way, which writes its own.
 */
function walkText(column: OrderColumn, direction: 'asc' | 'desc', audited: boolean, checked: boolean, bucket: number): string {
  const order = `${column} ${direction}, id ${direction}`;
  const tags = `$${audited ? 21 : 8}::text[]`;
  const chunks = `$${audited ? 22 : 9}::text[]`;
  // The check as one function (migration 0020): planned with the indexes whatever the
  // statistics were when this statement's generic plan was made.
  const check = checked ? `unchanged as (select carepath_search_inputs_unchanged($1, $2, ${tags}, ${chunks}) as ok),
    ` : '';
  const walkOnlyIf = checked ? '(select ok from unchanged) and ' : '';
  const audit = audited
    ? `,
    audit as (
      insert into audit_events (id, tenant_id, workspace_id, at, action, request_id, key_id, key_name,
                                resource_type, resource_id, outcome, details)
      select $8::text, $9::text, $10::text, $11::text, $12::text, $13::text, $14::text, $15::text,
             $16::text, $17::text, $18::text,
             $19::text || coalesce(string_agg(to_json(page.id)::text, ',' order by page.n), '') || $20::text
      from page where page.n > $7::bigint and page.n <= $7::bigint + $6::bigint${checked ? `
      having (select ok from unchanged) and count(*) > 0` : ''}
    ),
    audit_records as (
      insert into audit_event_records (workspace_id, record_id, event_id)
      select $10::text, page.id, $8::text
      from page where page.n > $7::bigint and page.n <= $7::bigint + $6::bigint
      union all
      select $10::text, runs.subject_record_id, $8::text
      from page join runs on runs.id = page.id and runs.workspace_id = $10::text
      where $2 = 'Pathway' and runs.subject_record_id is not null
        and page.n > $7::bigint and page.n <= $7::bigint + $6::bigint
      on conflict do nothing
    )`
    : '';
  return `
    with ${check}page as (
      select seq, id, row_number() over (order by ${order}) as n from records
      where ${walkOnlyIf}workspace_id = $1 and resource_type = $2
        and case when seq >= $3::bigint and seq < $4::bigint
                 then get_bit($5::bytea, seq - $3::bigint) = 1 else false end
      order by ${order}
      limit ${bucket}
    )${audit}
    select r.seq, r.id, r.ext_id, r.name, r.resource_type,
           array(select t.tag from record_tags t where t.record_id = r.id order by t.tag) as tags
    from page join records r on r.seq = page.seq
    where page.n > $7::bigint and page.n <= $7::bigint + $6::bigint
    order by page.n`;
}
