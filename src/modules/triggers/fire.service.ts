/**
 * Firing a web trigger (interface spec "Fire a trigger", DESIGN §4): the blueprint is copied
 * into a new run. With an idempotency key the same request always answers the same run.
 */
import type { Db } from '../../storage/database.js';
import type { RequestContext } from '../../auth/context.js';
import { ApiError, invalidRequest, notFound } from '../../lib/errors.js';
import { uuidv7 } from '../../lib/ids.js';
import { canonicalJson, sha256Hex } from '../../lib/json.js';
import type { RunCreator } from '../../engine/run-creator.js';
import { findRun } from '../runs/run.repository.js';
import type { RunView } from '../runs/run.view.js';
import { findRecordByExtId } from '../records/record.repository.js';
import type { TriggerForFire, TriggerForFireResolver } from './trigger.repository.js';
import { findClaim, keyHeldByAnotherRequest } from '../../engine/run-creation/claims.js';
import { subjectReference } from './subject-reference.js';

const IDEMPOTENCY_KEY = /^[\x20-\x7e]{1,255}$/;

/** A caller's idempotency key (fires, evaluations): 1–255 printable ASCII characters, or none. */
export function requireValidIdempotencyKey(key: string | undefined): void {
  if (key !== undefined && !IDEMPOTENCY_KEY.test(key)) {
    throw invalidRequest('Idempotency-Key must be 1–255 printable ASCII characters');
  }
}

export interface FireInput {
  payload?: unknown;
  autoStart?: boolean;
  bodyKey?: string;
  headerKey?: string;
}

export interface FireResult {
  /** true when an earlier request with the same key made this run */
  replayed: boolean;
  run: RunView;
}

/** The fingerprint of a fire: trigger and the body fields that shape the run, as sent. */
export function fireFingerprint(triggerId: string, input: FireInput): string {
  return sha256Hex(canonicalJson({ triggerId, payload: input.payload, autoStart: input.autoStart }));
}

export async function fireTrigger(
  deps: { db: Db; runCreator: RunCreator; triggers: TriggerForFireResolver; now: () => Date },
  ctx: RequestContext,
  triggerId: string,
  input: FireInput,
): Promise<FireResult> {
  const key = input.headerKey ?? input.bodyKey;
  requireValidIdempotencyKey(key);

  const found = await deps.triggers.find(ctx.workspaceId, triggerId);
  const trigger = found ? fireable(found) : notFound('trigger');
  if (trigger instanceof ApiError) {
    // The retry of a request that made its run before the trigger was deactivated or deleted
    // answers that run: same key, same body, the original run (interface spec "Fire", rule 2).
    // A client whose first answer was lost in a timeout must not be told no run exists.
    // Only a key used on this very trigger: to any other id (unknown, or a search trigger) the
    // refusal is the trigger's, as it would be without the key.
    const claim = key === undefined ? undefined : await findClaim(deps.db, ctx.workspaceId, key);
    if (claim?.triggerId === triggerId) return replay(deps.db, ctx, claim, fireFingerprint(triggerId, input));
    throw trigger;
  }

  const extId = subjectReference(input.payload);
  const subject = extId ? await findRecordByExtId(deps.db, ctx.workspaceId, 'Patient', extId) : undefined;
  const autoStart = input.autoStart ?? trigger.auto_start === 1;
  const now = deps.now();
  // Only a keyed fire is compared with an earlier one; an unkeyed fire needs no fingerprint.
  const fingerprint = key === undefined ? null : fireFingerprint(triggerId, input);

  const prepared = {
    ctx,
    runId: uuidv7(now.getTime()),
    triggerId,
    blueprint: { id: trigger.source_id, name: trigger.blueprint_name, version: trigger.blueprint_version },
    status: autoStart ? 'scheduled' : 'queued',
    payloadJson: input.payload === undefined ? null : JSON.stringify(input.payload),
    subjectRecordId: subject?.id ?? null,
    idempotencyKey: key ?? null,
    claim: key === undefined || fingerprint === null ? null : { key, fingerprint },
    origin: { via: 'fire' },
    at: now.toISOString(),
  } as const;
  const outcome = await deps.runCreator.create(prepared);
  if (outcome.kind === 'created') {
    return {
      replayed: false,
      run: {
        runId: prepared.runId,
        sourceId: prepared.blueprint.id,
        triggerId,
        idempotencyKey: prepared.idempotencyKey,
        automationStatus: prepared.status,
        createdAt: prepared.at,
        updatedAt: prepared.at,
        error: null,
      },
    };
  }
  return replay(deps.db, ctx, outcome, fingerprint);
}

/** The trigger, if a fire may start a run from it; else the refusal (the caller throws it). */
function fireable(trigger: TriggerForFire): (TriggerForFire & { blueprint_name: string; blueprint_version: number }) | ApiError {
  if (trigger.type !== 'web') return new ApiError('trigger_not_web', `only web triggers can be fired; this one is ${trigger.type === 'event' ? 'an' : 'a'} ${trigger.type} trigger`);
  if (trigger.active !== 1) return new ApiError('trigger_inactive', 'this trigger is inactive; activate it to fire it');
  if (trigger.blueprint_name == null || trigger.blueprint_version == null) return notFound('blueprint of this trigger');
  return trigger as TriggerForFire & { blueprint_name: string; blueprint_version: number };
}

/** The run an earlier request with this key made, if its fingerprint is this request's. */
async function replay(db: Db, ctx: RequestContext, claim: { runId: string; fingerprint: string | null }, fingerprint: string | null): Promise<FireResult> {
  if (claim.fingerprint !== fingerprint) throw keyHeldByAnotherRequest();
  const run = await findRun(db, ctx.workspaceId, claim.runId);
  if (!run) throw new ApiError('internal', 'the run of this request is missing');
  return { replayed: true, run };
}
