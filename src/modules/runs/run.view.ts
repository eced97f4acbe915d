import { parseJson } from '../../lib/json.js';
import type { RunTable } from '../../storage/database.js';
import type { RunStatus } from '../../engine/run-status.js';

/** A run as the API shows it (interface spec, "Run"). */
export interface RunView {
  runId: string;
  sourceId: string;
  triggerId: string;
  idempotencyKey: string | null;
  automationStatus: RunStatus;
  createdAt: string;
  updatedAt: string;
  error: { message: string; nodeId: string } | null;
}

export type RunRowForView = Pick<
  RunTable,
  'id' | 'source_id' | 'trigger_id' | 'idempotency_key' | 'automation_status' | 'created_at' | 'updated_at' | 'error'
>;

export const RUN_VIEW_COLUMNS = [
  'id',
  'source_id',
  'trigger_id',
  'idempotency_key',
  'automation_status',
  'created_at',
  'updated_at',
  'error',
] as const;

export function toRunView(row: RunRowForView): RunView {
  return {
    runId: row.id,
    sourceId: row.source_id,
    triggerId: row.trigger_id,
    idempotencyKey: row.idempotency_key,
    automationStatus: row.automation_status as RunStatus,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    error: parseJson(row.error, null),
  };
}

/** The create-from-fire answer carries these fields only (interface spec). */
export function toCreatedRun(view: RunView) {
  const { runId, sourceId, triggerId, idempotencyKey, automationStatus, createdAt } = view;
  return { runId, sourceId, triggerId, idempotencyKey, automationStatus, createdAt };
}
