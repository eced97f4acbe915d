/**
 * `start_pathway`: `{triggerId, payload}` → a new run of that web trigger in the same workspace,
 * made exactly as a fire makes one (fire.service, through the run creator), with the claim key
 * `<runId>:<nodeId>:<automationId>`: a step repeated after a lost worker finds the run it made
 * the first time and never starts a second one. The new run's subject is the one its payload
 * names (`payload.subject`), else this run's subject is passed on.
 *
 * Runs that start one another form a chain, at most MAX_PATHWAY_CHAIN runs long: a blueprint
 * that starts its own trigger, directly or through others, started 650 runs a second until its
 * trigger was deactivated (a review: 11,868 runs from one fire). The chain is read back through
 * the runs' idempotency keys, which name the run that started each (`<runId>:…`).
 */
import type { StartPathwayWith } from '../../modules/blueprints/blueprint.js';
import { ApiError } from '../../lib/errors.js';
import { systemContext } from '../../auth/context.js';
import { fireTrigger } from '../../modules/triggers/fire.service.js';
import { listRuns } from '../../modules/runs/run.repository.js';
import { findWorkspace } from '../../modules/tenancy/tenancy.repository.js';
import { filledSettings, StepFailure, type AutomationHandler } from './automation.js';
import type { EngineServices } from '../engine-services.js';

/** The most runs in one chain of runs started by one another (the first one included). */
export const MAX_PATHWAY_CHAIN = 10;

const STARTED_BY = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}):/;

/**
 * How many runs of the chain came before this one, counted up to `MAX_PATHWAY_CHAIN` (one point
 * read per run). A key a caller chose in that form makes a run look started by another run of
 * the workspace: it can only shorten that caller's own chains.
 */
async function runsBefore(db: EngineServices['db'], workspaceId: string, runId: string): Promise<number> {
  let count = 0;
  let current = runId;
  while (count < MAX_PATHWAY_CHAIN) {
    const run = await db.selectFrom('runs').select('idempotency_key').where('workspace_id', '=', workspaceId).where('id', '=', current).executeTakeFirst();
    const parent = run?.idempotency_key ? STARTED_BY.exec(run.idempotency_key)?.[1] : undefined;
    if (!parent || parent === current) return count;
    count++;
    current = parent;
  }
  return count;
}

export const startPathwayAutomation: AutomationHandler = {
  mode: 'call',
  async call(step, services) {
    const settings = filledSettings<StartPathwayWith>(step);
    if ((await runsBefore(services.db, step.run.workspaceId, step.run.id)) >= MAX_PATHWAY_CHAIN - 1) {
      throw new StepFailure(
        `start_pathway of trigger ${settings.triggerId}: this run is the ${MAX_PATHWAY_CHAIN}th of a chain of runs started by one another, ` +
          `the most there may be (a blueprint that starts its own trigger, directly or through others, would start runs for ever)`,
      );
    }
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
      return { result: { outcome: 'ok', output: { runId: fired.run.runId, triggerId: settings.triggerId } } };
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (error.code === 'idempotency_mismatch') {
        // An earlier attempt of this very step made the run (its payload rendered differently,
        // e.g. from now()); that run is the one this step started.
        const earlier = await listRuns(services.db, step.run.workspaceId, { idempotencyKey: step.stepKey, limit: 1 });
        if (earlier.data[0]) return { result: { outcome: 'ok', output: { runId: earlier.data[0].runId, triggerId: settings.triggerId } } };
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
