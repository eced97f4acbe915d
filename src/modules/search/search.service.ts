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
import type { Db } from '../../storage/database.js';
import type { RequestContext } from '../../auth/context.js';
import { recordAudit } from '../audit/audit.repository.js';
import { countRecords, findMatches, findRecordPage, type RecordCriteria } from './search.repository.js';
import { countExecuted, searchExecuted, searchExecutedAroundIds, type SearchFacts } from './search-audit.js';
import {
  DEFAULT_SEARCH_LIMIT,
  type ResourceType,
  type SearchBody,
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
  const matches = await findMatches(db, ctx.workspaceId, criteria);
  const total = matches.total;
  const facts: SearchFacts = { ...criteria, total, limit, offset };
  const audited = HOLDS_HEALTH_DATA[criteria.resourceType];
  const page = await findRecordPage(
    db,
    ctx.workspaceId,
    matches,
    { order: body.order ?? 'name', direction: body.orderDirection ?? 'asc', limit, offset },
    audited ? () => searchExecutedAroundIds(ctx, at, facts) : undefined,
  );
  const results = page.hits;
  if (audited && !page.audited) await recordAudit(db, ctx, at, [searchExecuted(facts, results.map((hit) => hit.id))]);
  return { total, limit, offset, results };
}

export async function countMatching(db: Db, ctx: RequestContext, body: SearchBody, now: Date): Promise<{ total: number }> {
  const criteria = criteriaOf(body);
  const total = await countRecords(db, ctx.workspaceId, criteria);
  if (HOLDS_HEALTH_DATA[criteria.resourceType]) await recordAudit(db, ctx, now.toISOString(), [countExecuted(criteria, total)]);
  return { total };
}
