/**
 * One planned run: the trigger's blueprint (name and version as they are now), the subject, the
 * payload and the idempotency key, and who started it (for the run's audit event).
 */
import type { PlannedRunRow } from './planned-runs.repository.js';
import { uuidv7 } from '../../lib/ids.js';

/** The trigger columns a planned run needs, with its blueprint's current name and version. */
export interface TriggerForRuns {
  id: string;
  source_id: string;
  auto_start: number;
  one_per_subject: number;
  blueprint_name: string;
  blueprint_version: number;
}

/** Who decides the runs, and the lease the deciding process holds on them. */
export interface PlanContext {
  tenantId: string;
  workspaceId: string;
  requestId: string;
  /** the API key behind the decision (an evaluation), or null for the service itself */
  keyId: string | null;
  keyName: string;
  owner: string;
  leaseExpiresAt: string;
  at: string;
}

export interface RunFields {
  subjectRecordId: string | null;
  payloadJson: string | null;
  idempotencyKey: string | null;
  origin: Record<string, unknown>;
}

export function plannedRun(trigger: TriggerForRuns, context: PlanContext, fields: RunFields): PlannedRunRow {
  return {
    id: uuidv7(Date.parse(context.at)),
    tenant_id: context.tenantId,
    workspace_id: context.workspaceId,
    trigger_id: trigger.id,
    source_id: trigger.source_id,
    source_version: trigger.blueprint_version,
    blueprint_name: trigger.blueprint_name,
    // autoStart decides: a queued run waits for POST /v1/runs/{runId}/start.
    status: trigger.auto_start === 1 ? 'scheduled' : 'queued',
    payload: fields.payloadJson,
    subject_record_id: fields.subjectRecordId,
    idempotency_key: fields.idempotencyKey,
    origin: JSON.stringify(fields.origin),
    request_id: context.requestId,
    key_id: context.keyId,
    key_name: context.keyName,
    planned_at: context.at,
    lease_owner: context.owner,
    lease_expires_at: context.leaseExpiresAt,
  };
}
