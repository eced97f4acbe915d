/**
 * The `search.execute` audit event of a search or a count, defined once. A search's event is
 * written in one of two ways, and both take its shape from here so they cannot drift:
 * - `recordAudit` after the page is read (SQLite, and PostgreSQL pages read in several steps);
 * - on PostgreSQL, by the very statement that reads the page (walk-in-store.ts), which fills in
 *   the ids of the page itself. It gets the row as `recordAudit` would write it, with the details'
 *   JSON split where the ids go, so the stored text is the same byte for byte, and writes the
 *   event's rows in the audit index by record (`audit_event_records`) from the same page, as
 *   `recordAudit` does from `details.ids` (audit.repository.ts `recordIdsOf`).
 */
import type { RequestContext } from '../../auth/context.js';
import { auditRow, type AuditInput } from '../audit/audit.repository.js';
import type { ResourceType, TagFilter } from './search.schemas.js';

/** What a search asked for and how many records matched. */
export interface SearchFacts {
  resourceType: ResourceType;
  filters: readonly TagFilter[];
  total: number;
  limit: number;
  offset: number;
}

/** A search that handed out the records `ids`, in the order it returned them. */
export function searchExecuted(facts: SearchFacts, ids: readonly string[]): AuditInput {
  const { resourceType, filters, total, limit, offset } = facts;
  return { action: 'search.execute', resourceType: 'search', resourceId: null, details: { resourceType, filters, total, limit, offset, ids } };
}

/** A count: no records handed out, but how many patients carry a tag is itself worth recording. */
export function countExecuted(criteria: { resourceType: ResourceType; filters: readonly TagFilter[] }, total: number): AuditInput {
  const { resourceType, filters } = criteria;
  return { action: 'search.execute', resourceType: 'search', resourceId: null, details: { resourceType, filters, total, countOnly: true } };
}

/**
 * A search's audit row for a store that writes the ids itself: every column as `recordAudit`
 * writes it, and its `details` as the JSON text before and after the elements of the ids array.
 * `detailsBefore + ids as JSON strings joined by "," + detailsAfter` is exactly the text
 * `recordAudit` would store for those ids.
 */
export interface AuditRowAroundIds {
  row: ReturnType<typeof auditRow>;
  detailsBefore: string;
  detailsAfter: string;
}

/** Stands in for the ids while the details are serialized; no filter tag (a slug) can contain it. */
const IDS_MARK = '\u0000ids of the page\u0000';

export function searchExecutedAroundIds(ctx: RequestContext, at: string, facts: SearchFacts): AuditRowAroundIds {
  const row = auditRow(ctx, at, searchExecuted(facts, [IDS_MARK]));
  const mark = JSON.stringify(IDS_MARK);
  const from = row.details.indexOf(mark);
  if (from < 0 || row.details.indexOf(mark, from + 1) >= 0) throw new Error('search audit details: the ids mark is not there exactly once');
  return { row, detailsBefore: row.details.slice(0, from), detailsAfter: row.details.slice(from + mark.length) };
}
