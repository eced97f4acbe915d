/**
 * `start_pathway`: `{triggerId, payload}` → a new run of that web trigger in the same workspace,
 * made exactly as a fire makes one (fire.service, through the run creator), with the claim key
 * `<runId>:<nodeId>:<automationId>`: a step repeated after a lost worker finds the run it made
 * the first time and never starts a second one. The new run's subject is the one its payload
 * names (`payload.subject`), else this run's subject is passed on.
 */
import type { StartPathwayWith } from '../../modules/blueprints/blueprint.js';
import { ApiError } from '../../lib/errors.js';
import { systemContext } from '../../auth/context.js';
import { fireTrigger } from '../../modules/triggers/fire.service.js';
import { listRuns } from '../../modules/runs/run.repository.js';
import { findWorkspace } from '../../modules/tenancy/tenancy.repository.js';
import { filledSettings, StepFailure, type AutomationHandler } from './automation.js';

export const startPathwayAutomation: AutomationHandler = {
  mode: 'call',
  async call(step, services) {
    const settings = filledSettings<StartPathwayWith>(step);
    const workspace = await findWorkspace(services.db, step.run.workspaceId);
    if (!workspace) throw new StepFailure('start_pathway: the run\'s workspace is gone');
    const ctx = systemContext(workspace.tenant_id, step.run.workspaceId, `run:${step.run.id}`);
    const subject = step.run.subject;
    const payload = withSubject(settings.payload, subject?.resourceType === 'Patient' ? subject.extId : null);
    try {
      const fired = await fireTrigger(
        { db: services.db, runCreator: services.runCreator, triggers: services.triggers, now: () => services.clock.now() },
        ctx,
        settings.triggerId,
        { payload, headerKey: step.stepKey },
      );
      return { outcome: 'ok', output: { runId: fired.run.runId, triggerId: settings.triggerId } };
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (error.code === 'idempotency_mismatch') {
        // An earlier attempt of this very step made the run (its payload rendered differently,
        // e.g. from now()); that run is the one this step started.
        const earlier = await listRuns(services.db, step.run.workspaceId, { idempotencyKey: step.stepKey, limit: 1 });
        if (earlier.data[0]) return { outcome: 'ok', output: { runId: earlier.data[0].runId, triggerId: settings.triggerId } };
      }
      throw new StepFailure(`start_pathway of trigger ${settings.triggerId}: ${error.message}`);
    }
  },
};

/** The payload to fire with: this run's subject passed on unless the payload names one. */
function withSubject(payload: unknown, subjectExtId: string | null): unknown {
  if (subjectExtId === null) return payload;
  if (payload === undefined || payload === null) return { subject: { reference: `Patient/${subjectExtId}` } };
  if (typeof payload !== 'object' || Array.isArray(payload) || 'subject' in payload) return payload;
  return { ...payload, subject: { reference: `Patient/${subjectExtId}` } };
}
