/**
 * Search and count as the API offers them: defaults applied, and every search that can return
 * protected health information (Patient and Pathway records) audited as `search.execute`, with
 * the filters and the ids it handed out (interface spec "Search", DESIGN §8 and §10).
 *
 * The audit event is written after the read and before the answer: if it cannot be written,
 * the caller gets a 500 rather than data nobody recorded giving out.
 */
import type { Db } from '../../storage/database.js';
import type { RequestContext } from '../../auth/context.js';
import { recordAudit } from '../audit/audit.repository.js';
import { countRecords, findMatches, findRecordPage, type RecordCriteria } from './search.repository.js';
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
  const matches = await findMatches(db, ctx.workspaceId, criteria);
  const total = matches.total;
  const results = await findRecordPage(db, ctx.workspaceId, matches, {
    order: body.order ?? 'name',
    direction: body.orderDirection ?? 'asc',
    limit,
    offset,
  });
  if (HOLDS_HEALTH_DATA[criteria.resourceType]) {
    await recordAudit(db, ctx, now.toISOString(), [
      {
        action: 'search.execute',
        resourceType: 'search',
        resourceId: null,
        details: {
          resourceType: criteria.resourceType,
          filters: criteria.filters,
          total,
          limit,
          offset,
          ids: results.map((hit) => hit.id),
        },
      },
    ]);
  }
  return { total, limit, offset, results };
}

/** A count shows no records, but how many patients carry a tag is itself worth recording. */
export async function countMatching(db: Db, ctx: RequestContext, body: SearchBody, now: Date): Promise<{ total: number }> {
  const criteria = criteriaOf(body);
  const total = await countRecords(db, ctx.workspaceId, criteria);
  if (HOLDS_HEALTH_DATA[criteria.resourceType]) {
    await recordAudit(db, ctx, now.toISOString(), [
      {
        action: 'search.execute',
        resourceType: 'search',
        resourceId: null,
        details: { resourceType: criteria.resourceType, filters: criteria.filters, total, countOnly: true },
      },
    ]);
  }
  return { total };
}
