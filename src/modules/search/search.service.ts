/**
 * Search and count as the API offers them: defaults applied, and every search that can return
 * protected health information (Patient and Pathway records) audited as `search.execute`, with
 * the filters and the ids it handed out (interface spec "Search", DESIGN §8 and §10).
 *
 * The audit event is written after the read and before the answer: if it cannot be written,
 * the caller gets a 500 rather than data nobody recorded giving out. Where the page is one
 * statement (PostgreSQL's walk), that statement writes the event itself; otherwise it is written
 * on its own once the page is read. Its shape comes from search-audit.ts either way.
 */
import type { Db, DbOrTx } from '../../storage/database.js';
import { dialectOfDb } from '../../storage/dialect.js';
import type { RequestContext } from '../../auth/context.js';
import { recordAudit } from '../audit/audit.repository.js';
import { countRecords, findMatches, findRecordPage, findUnchangedPage, type RecordCriteria } from './search.repository.js';
import { countExecuted, searchExecuted, searchExecutedAroundIds, type SearchFacts } from './search-audit.js';
import {
  DEFAULT_SEARCH_LIMIT,
  type ResourceType,
  type SearchBody,
  type SearchHit,
  type SearchResult,
} from './search.schemas.js';

/** Practitioner records describe staff, not patients: searching them is not audited. */
const HOLDS_HEALTH_DATA: Record<ResourceType, boolean> = { Patient: true, Pathway: true, Practitioner: false };

function criteriaOf(body: SearchBody): RecordCriteria {
  return { resourceType: body.resourceType, filters: body.filters ?? [] };
}

export async function searchRecords(db: Db, ctx: RequestContext, body: SearchBody, now: Date): Promise<SearchResult> {
  const criteria = criteriaOf(body);
  const limit = body.limit ?? DEFAULT_SEARCH_LIMIT;
  const offset = body.offset ?? 0;
  const at = now.toISOString();
  const audited = HOLDS_HEALTH_DATA[criteria.resourceType];
  const pageQuery = { order: body.order ?? 'name', direction: body.orderDirection ?? 'asc', limit, offset } as const;
  const read = async (store: DbOrTx) => {
    const matches = await findMatches(store, ctx.workspaceId, criteria);
    const facts: SearchFacts = { ...criteria, total: matches.total, limit, offset };
    const page = await findRecordPage(store, ctx.workspaceId, matches, pageQuery, audited ? () => searchExecutedAroundIds(ctx, at, facts) : undefined);
    return { facts, page };
  };
  // The matches (tag bitmaps) and the page are two reads; a tag change committed between them
  // gave pages whose records contradicted their own filter (a review: a `with flip` page of
  // records tagged `flop` only). On PostgreSQL both read one snapshot (REPEATABLE READ; the
  // page's statement writes the audit row, so not READ ONLY). On SQLite another request's
  // commit can only land between the two reads: the hits are checked against the filters and
  // the search read again, and a record that still contradicts them is left out, never handed out.
  if (dialectOfDb(db) === 'postgres') {
    // A search asked before, over tags the store has not changed since, is one statement that
    // checks that itself (search.repository.ts `findUnchangedPage`).
    const unchanged = await findUnchangedPage(
      db,
      ctx.workspaceId,
      criteria,
      pageQuery,
      audited ? (total) => searchExecutedAroundIds(ctx, at, { ...criteria, total, limit, offset }) : undefined,
    );
    if (unchanged) return { total: unchanged.total, limit, offset, results: unchanged.hits };
    const { facts, page } = await db.transaction().setIsolationLevel('repeatable read').execute(read);
    if (audited && !page.audited) await recordAudit(db, ctx, at, [searchExecuted(facts, page.hits.map((hit) => hit.id))]);
    return { total: facts.total, limit, offset, results: page.hits };
  }
  let found = await read(db);
  for (let again = 1; again < SQLITE_READS && !found.page.hits.every(agreesWith(criteria)); again++) found = await read(db);
  const results = found.page.hits.filter(agreesWith(criteria));
  if (audited && !found.page.audited) await recordAudit(db, ctx, at, [searchExecuted(found.facts, results.map((hit) => hit.id))]);
  return { total: found.facts.total, limit, offset, results };
}

/** How many times a SQLite search reads again when a write came between its two reads. */
const SQLITE_READS = 3;

/** Whether a hit carries every `with` tag and no `without` tag of the search. */
function agreesWith(criteria: RecordCriteria): (hit: SearchHit) => boolean {
  return (hit) => criteria.filters.every((filter) => hit.tags.includes(filter.tag) === (filter.op === 'with'));
}

export async function countMatching(db: Db, ctx: RequestContext, body: SearchBody, now: Date): Promise<{ total: number }> {
  const criteria = criteriaOf(body);
  const total = await countRecords(db, ctx.workspaceId, criteria);
  if (HOLDS_HEALTH_DATA[criteria.resourceType]) await recordAudit(db, ctx, now.toISOString(), [countExecuted(criteria, total)]);
  return { total };
}
