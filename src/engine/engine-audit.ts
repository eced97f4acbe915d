/**
 * Audit events of what the engine itself does with health data, beyond the runs it creates
 * (`run.create`): a `tag` step that changes a record (`record.tags.change`), and an `http` step
 * that sent a run's data out of the service (`http.send`, the disclosure: to whom, not what).
 * Each is written in the transaction of the step it records, so the trail has it exactly when
 * the step timeline does.
 *
 * Who: no key made the change. The request id is `run:<runId>` and the key name `carepath`, as
 * for the runs a `start_pathway` step creates.
 */
import { systemContext } from '../auth/context.js';
import { recordAudit, type AuditInput } from '../modules/audit/audit.repository.js';
import { findWorkspace } from '../modules/tenancy/tenancy.repository.js';
import type { DbOrTx } from '../storage/database.js';
import type { RunInHand } from './run-context.js';

export async function recordEngineAudit(tx: DbOrTx, run: Pick<RunInHand, 'id' | 'workspaceId'>, at: string, input: AuditInput): Promise<void> {
  // The tenant is the workspace's: one primary-key read, only for the steps audited here.
  const workspace = await findWorkspace(tx, run.workspaceId);
  if (!workspace) return;
  await recordAudit(tx, systemContext(workspace.tenant_id, run.workspaceId, `run:${run.id}`), at, [input]);
}

/** What an `http` step sent out: the origin only (its path and query may hold patient data). */
export interface CallDisclosure {
  method: string;
  origin: string;
  /** Requests sent (tries after a 5xx, a 429 or a network failure included). */
  tries: number;
  /** The last answer's status; null when no answer came (a timeout, a reset). */
  status: number | null;
}

/** The step a call belongs to, as its `http.send` events name it. */
interface CallStep {
  runId: string;
  nodeId: string;
  automationId: string;
  subjectRecordId: string | null;
}

/**
 * An `http.send` event: to whom the step sent, how many requests went and the last answer's
 * status (null where not known: an attempt that never recorded its outcome).
 */
export function httpSentAudit(
  step: CallStep,
  sent: Pick<CallDisclosure, 'method' | 'origin'> & { tries: number | null; status: number | null },
  succeeded: boolean,
  more: Record<string, unknown> = {},
): AuditInput {
  return {
    action: 'http.send',
    resourceType: 'run',
    resourceId: step.runId,
    outcome: succeeded ? 'success' : 'failure',
    details: {
      nodeId: step.nodeId,
      automationId: step.automationId,
      subjectRecordId: step.subjectRecordId,
      method: sent.method,
      origin: sent.origin,
      tries: sent.tries,
      status: sent.status,
      ...more,
    },
  };
}

/**
 * The attempt of a call that never recorded its outcome (its worker died, lost the run, or let it
 * go paused mid-call), audited when the call is made again: it may have reached the partner,
 * which the redo's own event alone did not say (a partner could have had the data twice, the
 * trail said once). How many requests it sent and what came back are not known (null); the
 * method and origin are the redo's, filled from the same run data.
 */
export function interruptedCallAudit(step: CallStep, target: Pick<CallDisclosure, 'method' | 'origin'>, interruptedStepId: string): AuditInput {
  return httpSentAudit(step, { ...target, tries: null, status: null }, false, { interruptedStepId });
}

/**
 * A `record.tags.change` event: the record changed (the subject's, or the run's own Pathway
 * record) and the run's patient record (`subjectRecordId`, null without one), as in the run's
 * other events: a tag put on a patient's pathway is found by the patient's record too.
 */
export function tagsChangedAudit(
  step: { runId: string; nodeId: string; automationId: string; subjectRecordId: string | null },
  record: { id: string; target: 'subject' | 'pathway' },
  add: string[],
  remove: string[],
): AuditInput {
  return {
    action: 'record.tags.change',
    resourceType: 'record',
    resourceId: record.id,
    details: {
      target: record.target,
      runId: step.runId,
      nodeId: step.nodeId,
      automationId: step.automationId,
      subjectRecordId: step.subjectRecordId,
      add,
      remove,
    },
  };
}
