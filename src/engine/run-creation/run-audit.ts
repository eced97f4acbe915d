import { auditRow } from '../../modules/audit/audit.repository.js';
import type { PreparedRun } from '../run-creator.js';

/**
 * The `run.create` audit event of a new run: the same on both stores' batch writers. It names the
 * patient's record the run is about (`subjectRecordId`, null without one, as in the other run
 * events), so the trail answers "which runs were started for this patient" without reading runs.
 */
export function runCreatedAudit(run: PreparedRun) {
  return auditRow(run.ctx, run.at, {
    action: 'run.create',
    resourceType: 'run',
    resourceId: run.runId,
    details: {
      triggerId: run.triggerId,
      sourceId: run.blueprint.id,
      status: run.status,
      subjectRecordId: run.subjectRecordId,
      ...run.origin,
    },
  });
}
