import { auditRow } from '../../modules/audit/audit.repository.js';
import type { PreparedRun } from '../run-creator.js';

/** The `run.create` audit event of a new run: the same on both stores' batch writers. */
export function runCreatedAudit(run: PreparedRun) {
  return auditRow(run.ctx, run.at, {
    action: 'run.create',
    resourceType: 'run',
    resourceId: run.runId,
    details: { triggerId: run.triggerId, sourceId: run.blueprint.id, status: run.status, ...run.origin },
  });
}
