/**
 * `POST /v1/triggers/{triggerId}/evaluate` (DESIGN §9): a search trigger's saved query is run now
 * and starts one run per matching record, exactly as a schedule tick does (onePerSubject, subject
 * = the record), with the idempotency key `evaluate:<triggerId>:<time>`. Only search triggers can
 * be evaluated; an inactive one answers 409 `trigger_inactive`.
 */
import { randomBytes } from 'node:crypto';
import type { RequestContext } from '../../auth/context.js';
import { ApiError, invalidRequest, notFound } from '../../lib/errors.js';
import { createPlannedRuns, DEFAULT_PLAN_LEASE_MS, type RunStarterDeps } from '../events/planned-runs.js';
import { loadTriggerForEvaluation } from './search-trigger.repository.js';
import { planSearchRuns } from './search-runs.js';

export interface EvaluationResult {
  /** runs started */
  started: number;
  /** matching records held back by onePerSubject (they already have a live run of this trigger), or runs started for a run (a Pathway query) */
  skipped: number;
  idempotencyKey: string;
}

export async function evaluateSearchTrigger(
  deps: RunStarterDeps,
  ctx: RequestContext,
  triggerId: string,
  planLeaseMs: number = DEFAULT_PLAN_LEASE_MS,
): Promise<EvaluationResult> {
  const trigger = await loadTriggerForEvaluation(deps.db, triggerId, ctx.workspaceId);
  if (!trigger) throw notFound('trigger');
  if (trigger.type !== 'search') {
    throw invalidRequest(`only search triggers can be evaluated; this one is a ${trigger.type} trigger`);
  }
  if (trigger.active !== 1) throw new ApiError('trigger_inactive', 'this trigger is inactive; activate it to evaluate it');
  if (!trigger.blueprint) throw notFound('blueprint of this trigger');
  if (!trigger.query) throw notFound('saved query of this trigger');

  const now = deps.now();
  const at = now.toISOString();
  const idempotencyKey = `evaluate:${triggerId}:${at}`;
  // Its own owner per evaluation: if this process dies, a sweep elsewhere finishes the runs.
  const owner = `evaluate:${randomBytes(6).toString('hex')}`;
  const context = {
    tenantId: ctx.tenantId,
    workspaceId: ctx.workspaceId,
    requestId: ctx.requestId,
    keyId: ctx.keyId || null,
    keyName: ctx.keyName,
    owner,
    leaseExpiresAt: new Date(now.getTime() + planLeaseMs).toISOString(),
    at,
  };
  const query = trigger.query;
  const planned = await deps.db
    .transaction()
    .execute((tx) =>
      planSearchRuns(tx, deps.dialect, { ...trigger, query }, context, { idempotencyKey, tick: at, origin: { via: 'evaluate' } }),
    );
  const started = await createPlannedRuns(deps, owner, planned.plannedRunIds, planLeaseMs);
  return { started, skipped: planned.skipped, idempotencyKey };
}
