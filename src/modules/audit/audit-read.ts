/**
 * The events of reads of the audit trail itself (`audit.read` for a page of
 * `GET /v1/audit-events`, `audit.export` for `carepath admin audit export`): the trail names
 * which patients' records were touched and by whom, so "who looked at the access log" has to be
 * answerable from it as well (docs/decisions.md, "Reading the audit trail is audited").
 */
import type { AuditFilters, AuditInput } from './audit.repository.js';

/**
 * What a read asked and how much it got: the filters sent (only those; `since` as applied, ISO
 * UTC) and the number of events handed out. Never the events themselves: the trail would copy
 * itself with each read. A read of one record's events (`recordId`) names that record
 * (resource type `record`, which `recordIdsOf` indexes), so the record's own report lists who
 * pulled it; other reads name no resource (the workspace's trail, which the event's workspace is).
 */
export function auditReadOf(
  action: 'audit.read' | 'audit.export',
  filters: AuditFilters,
  count: number,
  more: { outcome?: 'success' | 'failure'; cursor?: boolean } = {},
): AuditInput {
  const asked = Object.fromEntries(Object.entries(filters).filter(([, value]) => value !== undefined));
  return {
    action,
    resourceType: filters.recordId === undefined ? null : 'record',
    resourceId: filters.recordId ?? null,
    ...(more.outcome === undefined ? {} : { outcome: more.outcome }),
    // `cursor`: whether the page followed another (true) or began a read (false), as on
    // `run.steps.read`; its value, the last id of the page before, would say nothing more.
    details: { filters: asked, ...(more.cursor === undefined ? {} : { cursor: more.cursor }), count },
  };
}
