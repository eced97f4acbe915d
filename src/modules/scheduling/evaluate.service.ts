/**
 * `POST /v1/triggers/{triggerId}/evaluate` (DESIGN §9): a search trigger's saved query is run now
 * and starts one run per matching record, exactly as a schedule tick does (onePerSubject, subject
 * = the record), with the idempotency key `evaluate:<triggerId>:<time>`. Only search triggers can
 * be evaluated; an inactive one answers 409 `trigger_inactive`.
 *
 * With the caller's `Idempotency-Key` the runs carry that key instead, and an evaluation of this
 * trigger that already started runs with it is answered again (`replayed`, the runs it started)
 * instead of run again: a retry after a timeout no longer starts a second cohort. The trigger's
 * row is locked first, so two evaluations with one key cannot both find none.
 *
 * The key's scope is the workspace, as a fire's (DESIGN §4): the evaluation claims it in
 * `idempotency_keys` with the fingerprint `evaluate:<triggerId>`, so the key used before by a
 * fire or by the evaluation of another trigger is 409 `idempotency_mismatch`, and a fire with a
 * key an evaluation took is refused the same way. (Before, only this trigger's runs were looked
 * at: a reused key started a cohort, and `GET /v1/runs?idempotencyKey=` mixed two requests.)
 */
import { randomBytes } from 'node:crypto';
import type { RequestContext } from '../../auth/context.js';
import { ApiError, invalidRequest, notFound } from '../../lib/errors.js';
import { createPlannedRuns, DEFAULT_PLAN_LEASE_MS, type RunStarterDeps } from '../events/planned-runs.js';
import { lockTriggers } from '../events/planned-runs.repository.js';
import { findClaim, keyHeldByAnotherRequest } from '../../engine/run-creation/claims.js';
import type { DbOrTx } from '../../storage/database.js';
import { loadTriggerForEvaluation } from './search-trigger.repository.js';
import { planSearchRuns } from './search-runs.js';

export interface EvaluationResult {
  /** runs started */
  started: number;
  /** matching records held back by onePerSubject (they already have a live run of this trigger), or runs started for a run (a Pathway query) */
  skipped: number;
  idempotencyKey: string;
  /** An earlier evaluation with the caller's key started these runs; nothing was run again. */
  replayed: boolean;
}

export async function evaluateSearchTrigger(
  deps: RunStarterDeps,
  ctx: RequestContext,
  triggerId: string,
  callerKey?: string,
  planLeaseMs: number = DEFAULT_PLAN_LEASE_MS,
): Promise<EvaluationResult> {
  // The retry of an evaluation that ran before the trigger was deactivated or deleted answers
  // what it started, as a fire's retry does: a client whose first answer was lost must not be
  // told nothing ran (an idempotency review). Only a key this very trigger's evaluation claimed.
  if (callerKey !== undefined) {
    const claim = await findClaim(deps.db, ctx.workspaceId, callerKey);
    if (claim?.fingerprint === evaluationFingerprint(triggerId)) {
      const earlier = await runsWithKey(deps.db, ctx.workspaceId, triggerId, callerKey);
      return { started: earlier, skipped: 0, idempotencyKey: callerKey, replayed: true };
    }
  }
  const trigger = await loadTriggerForEvaluation(deps.db, triggerId, ctx.workspaceId);
  if (!trigger) throw notFound('trigger');
  if (trigger.type !== 'search') {
    throw invalidRequest(`only search triggers can be evaluated; this one is ${trigger.type === 'event' ? 'an' : 'a'} ${trigger.type} trigger`);
  }
  if (trigger.active !== 1) throw new ApiError('trigger_inactive', 'this trigger is inactive; activate it to evaluate it');
  if (!trigger.blueprint) throw notFound('blueprint of this trigger');
  if (!trigger.query) throw notFound('saved query of this trigger');

  const now = deps.now();
  const at = now.toISOString();
  const idempotencyKey = callerKey ?? `evaluate:${triggerId}:${at}`;
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
  const planned = await deps.db.transaction().execute(async (tx) => {
    if (callerKey !== undefined) {
      await lockTriggers(tx, deps.dialect, [trigger.id]);
      const claimedBefore = await claimKey(tx, ctx.workspaceId, trigger.id, callerKey, at);
      const earlier = await runsWithKey(tx, ctx.workspaceId, trigger.id, callerKey);
      if (claimedBefore || earlier > 0) return { replayed: earlier };
    }
    return planSearchRuns(tx, deps.dialect, { ...trigger, query }, context, { idempotencyKey, tick: at, origin: { via: 'evaluate' } });
  });
  if ('replayed' in planned) return { started: planned.replayed, skipped: 0, idempotencyKey, replayed: true };
  const started = await createPlannedRuns(deps, owner, planned.plannedRunIds, planLeaseMs);
  return { started, skipped: planned.skipped, idempotencyKey, replayed: false };
}

/** What an evaluation's claim of a key records instead of a fire's request fingerprint. */
const evaluationFingerprint = (triggerId: string) => `evaluate:${triggerId}`;

/**
 * Takes the key for an evaluation of this trigger (false), finds it taken by an earlier one
 * (true: a replay, whether or not that one started runs), or refuses it when a fire or an
 * evaluation of another trigger holds it. The claim names no run (an evaluation starts many, or
 * none).
 */
async function claimKey(tx: DbOrTx, workspaceId: string, triggerId: string, key: string, at: string): Promise<boolean> {
  const fingerprint = evaluationFingerprint(triggerId);
  const inserted = await tx
    .insertInto('idempotency_keys')
    .values({ workspace_id: workspaceId, key, fingerprint, trigger_id: triggerId, run_id: '', created_at: at })
    .onConflict((conflict) => conflict.columns(['workspace_id', 'key']).doNothing())
    .executeTakeFirst();
  if (Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0) return false;
  const claim = await findClaim(tx, workspaceId, key);
  if (claim?.fingerprint !== fingerprint) throw keyHeldByAnotherRequest();
  return true;
}

/**
 * Runs of the trigger with this key, made or still planned. A planned row keeps its run's id and
 * is removed only after the run is made, so the two are counted as one set of ids.
 */
async function runsWithKey(tx: DbOrTx, workspaceId: string, triggerId: string, key: string): Promise<number> {
  // One statement, so one snapshot: a planned run becomes a run in two commits (the run, then the
  // planned row's deletion), and two reads could fall between them and miss it (a retry counted
  // 0 of 4 while the first call was still making its runs).
  const ids = await tx
    .selectFrom('runs')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('idempotency_key', '=', key)
    .where('trigger_id', '=', triggerId)
    .union(tx.selectFrom('planned_runs').select('id').where('trigger_id', '=', triggerId).where('idempotency_key', '=', key))
    .execute();
  return ids.length;
}
