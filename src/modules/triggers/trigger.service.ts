/**
 * Creating and changing triggers: the rules the schemas cannot say alone. A trigger's type is
 * fixed at creation; each type takes its own fields and refuses the others' (DESIGN §2), and
 * every id it points at must live in the caller's workspace.
 */
import { claimCreateKey, type CreateKey } from '../idempotency/create-keys.js';
import type { Db, DbOrTx } from '../../storage/database.js';
import { withinTransaction } from '../../storage/transaction.js';
import type { RequestContext } from '../../auth/context.js';
import { invalidRequest, notFound } from '../../lib/errors.js';
import { uuidv7 } from '../../lib/ids.js';
import { parseJson } from '../../lib/json.js';
import { findBlueprint } from '../diagrams/diagram.repository.js';
import { lockQuery } from '../queries/query.repository.js';
import { parseSchedule } from '../schedules/schedule.js';
import { nextRunAfter } from '../schedules/next-tick.js';
import { eventNameProblem } from '../../ingestion/events.js';
import { triggerConditionProblem } from '../blueprints/expression.check.js';
import { ThreadTimeBudget } from '../../lib/thread-time-budget.js';
import { perStore } from '../../storage/per-store.js';
import { recordAudit } from '../audit/audit.repository.js';
import { setupCreated, setupDeleted, setupUpdated } from '../audit/setup-audit.js';
import type { CreateTriggerBody, TriggerView, UpdateTriggerBody } from './trigger.schemas.js';
import {
  findTrigger,
  lockTrigger,
  insertTrigger,
  toTriggerView,
  updateTrigger,
  type StoredSchedule,
  type TriggerRow,
} from './trigger.repository.js';

type TriggerType = TriggerRow['type'];

/** Which type-specific fields each trigger type takes. */
const FIELDS_OF_TYPE: Record<TriggerType, readonly string[]> = {
  web: [],
  search: ['queryId', 'schedule', 'onePerSubject'],
  event: ['event', 'when', 'onePerSubject'],
};
const TYPE_SPECIFIC = ['queryId', 'schedule', 'event', 'when', 'onePerSubject'] as const;

/** DESIGN §2: a field of another trigger type is refused, also as null (sent is sent). */
function refuseForeignFields(type: TriggerType, body: Record<string, unknown>): void {
  for (const field of TYPE_SPECIFIC) {
    if (body[field] !== undefined && !FIELDS_OF_TYPE[type].includes(field)) {
      throw invalidRequest(`body.${field} does not apply to ${type === 'event' ? 'an' : 'a'} ${type} trigger`);
    }
  }
}

async function requireBlueprint(db: Db, workspaceId: string, sourceId: string): Promise<void> {
  if (!(await findBlueprint(db, workspaceId, sourceId))) {
    throw invalidRequest('body.sourceId does not name a blueprint in this workspace');
  }
}

/** In the transaction that writes the trigger: the query exists and stays until it commits. */
async function requireQuery(tx: DbOrTx, workspaceId: string, queryId: string): Promise<void> {
  if (!(await lockQuery(tx, workspaceId, queryId, 'share'))) {
    throw invalidRequest('body.queryId does not name a saved query in this workspace');
  }
}

/**
 * A schedule as stored: its anchor is `startAt`, else the trigger's creation time, also when a
 * PATCH changes the schedule (it used to become the time of the PATCH, so changing only the
 * time zone of a daily trigger moved the time of day it ran at).
 */
export function storedSchedule(input: unknown, createdAt: Date): StoredSchedule {
  const schedule = parseSchedule(input);
  return { ...schedule, anchor: schedule.startAt ?? createdAt.toISOString() };
}

/**
 * The serving thread's time each key may spend checking conditions: a second in ten
 * (lib/thread-time-budget.ts). A usual condition takes microseconds; a crafted one up to two
 * seconds, and one key could otherwise hold the thread that serves everyone.
 */
const conditionChecks = perStore(() => new ThreadTimeBudget(1_000, 10_000, 'checking conditions'));

/** A condition that cannot compile, or could never hold, would start no run: refused at once, saying why. */
function refuseBadWhen(db: Db, ctx: RequestContext, when: string | null | undefined): void {
  if (when === null || when === undefined) return;
  const problem = conditionChecks(db).spend(ctx.keyId, () => triggerConditionProblem(when));
  if (problem) throw invalidRequest(`body.when ${problem}`);
}

/** An event trigger on an event carepath never raises would never start a run: refused at once. */
function refuseImpossibleEvent(event: string): void {
  const problem = eventNameProblem(event);
  if (problem) throw invalidRequest(`body.event ${problem}`);
}

/**
 * The next tick after now; null without a schedule, when the series has ended, or while the
 * trigger is inactive. An inactive trigger has no next run, and one turned on again runs at the
 * first tick after that moment: not at once for a tick that fell while it was off.
 */
export function nextRunOf(schedule: StoredSchedule | null, now: Date, active = true): string | null {
  if (!schedule || !active) return null;
  return nextRunAfter(schedule, new Date(schedule.anchor), now)?.toISOString() ?? null;
}

export async function createTrigger(db: Db, ctx: RequestContext, body: CreateTriggerBody, now: Date, createKey?: CreateKey): Promise<TriggerView> {
  refuseForeignFields(body.type, body);
  await requireBlueprint(db, ctx.workspaceId, body.sourceId);
  if (body.type === 'search' && !body.queryId) throw invalidRequest('body.queryId is required for a search trigger');
  if (body.type === 'event' && !body.event) throw invalidRequest('body.event is required for an event trigger');
  if (body.type === 'event') refuseImpossibleEvent(body.event!);
  refuseBadWhen(db, ctx, body.when);

  const schedule = body.type === 'search' && body.schedule ? storedSchedule(body.schedule, now) : null;
  const at = now.toISOString();
  const row: TriggerRow = {
    id: uuidv7(now.getTime()),
    workspace_id: ctx.workspaceId,
    name: body.name,
    source_id: body.sourceId,
    type: body.type,
    query_id: body.type === 'search' ? body.queryId! : null,
    event: body.type === 'event' ? body.event! : null,
    schedule: schedule ? JSON.stringify(schedule) : null,
    next_run_at: nextRunOf(schedule, now, body.active !== false),
    last_tick_at: null,
    auto_start: body.autoStart === false ? 0 : 1,
    active: body.active === false ? 0 : 1,
    // DESIGN §9: a cohort (search) trigger never forks a second pathway per subject by default.
    one_per_subject: (body.onePerSubject ?? body.type === 'search') ? 1 : 0,
    when_expression: body.type === 'event' ? (body.when ?? null) : null,
    created_at: at,
    updated_at: at,
    deleted_at: null,
  };
  const view = toTriggerView(row);
  await withinTransaction(db, async (tx) => {
    await claimCreateKey(tx, ctx.workspaceId, createKey, row.id, at);
    if (row.query_id) await requireQuery(tx, ctx.workspaceId, row.query_id);
    await insertTrigger(tx, row);
    await recordAudit(tx, ctx, at, [setupCreated('trigger', row.id, view)]);
  });
  return view;
}

export async function changeTrigger(
  db: Db,
  ctx: RequestContext,
  triggerId: string,
  body: UpdateTriggerBody,
  now: Date,
): Promise<TriggerView> {
  const row = await findTrigger(db, ctx.workspaceId, triggerId);
  if (!row) throw notFound('trigger');
  // Nothing to change: the trigger as it is, not moved (`updatedAt`) and not audited as changed.
  if (Object.keys(body).length === 0) return toTriggerView(row);
  if (body.type !== undefined) throw invalidRequest('body.type cannot be changed; create a new trigger instead');
  refuseForeignFields(row.type, body);

  const changes: Partial<TriggerRow> = {};
  if (body.name !== undefined) changes.name = body.name;
  if (body.sourceId !== undefined) {
    await requireBlueprint(db, ctx.workspaceId, body.sourceId);
    changes.source_id = body.sourceId;
  }
  if (body.autoStart !== undefined) changes.auto_start = body.autoStart ? 1 : 0;
  if (body.active !== undefined) changes.active = body.active ? 1 : 0;
  if (row.type === 'search') {
    if (body.queryId === null) throw invalidRequest('body.queryId cannot be cleared on a search trigger');
    if (body.queryId !== undefined) changes.query_id = body.queryId;
    if (body.schedule !== undefined) {
      const schedule = body.schedule === null ? null : storedSchedule(body.schedule, new Date(row.created_at));
      changes.schedule = schedule ? JSON.stringify(schedule) : null;
    }
  }
  if (row.type === 'event') {
    if (body.event === null) throw invalidRequest('body.event cannot be cleared on an event trigger');
    if (body.event !== undefined) {
      refuseImpossibleEvent(body.event);
      changes.event = body.event;
    }
    // null takes the condition away: every such event starts a run again.
    if (body.when !== undefined) {
      refuseBadWhen(db, ctx, body.when);
      changes.when_expression = body.when;
    }
  }
  if (row.type !== 'web' && body.onePerSubject !== undefined) {
    changes.one_per_subject = (body.onePerSubject ?? row.type === 'search') ? 1 : 0;
  }
  changes.updated_at = now.toISOString();
  return withinTransaction(db, async (tx) => {
    // What depends on the trigger's state is decided on the row as it is now, held: read before,
    // a PATCH {active: true} that raced a PATCH {active: false} on PostgreSQL saw it active still,
    // left next_run_at alone, and wrote active over the other's next_run_at = null: an active
    // trigger that never ticked again (a review, 2026-11-28: 13 of 40 rounds).
    const current = await lockTrigger(tx, ctx.workspaceId, triggerId);
    if (!current) throw notFound('trigger');
    const written = { ...changes, ...nextRunChange(current, changes, body.schedule !== undefined, now) };
    if (written.query_id) await requireQuery(tx, ctx.workspaceId, written.query_id);
    else if (written.active === 1 && current.active === 0 && current.query_id) {
      // The query may have been deleted while the trigger was off (deleting is allowed then).
      if (!(await lockQuery(tx, ctx.workspaceId, current.query_id, 'share'))) {
        throw invalidRequest('the saved query of this trigger was deleted; send a new body.queryId to activate it');
      }
    }
    const view = toTriggerView({ ...current, ...written });
    await updateTrigger(tx, triggerId, written);
    await recordAudit(tx, ctx, now.toISOString(), [setupUpdated('trigger', triggerId, body, view)]);
    return view;
  });
}

/**
 * A search trigger's next tick, when its schedule or its being active changes: the next tick
 * after now, or after the last tick run if that is later (this process's clock is behind the
 * one that ran it): never one that ran already (migration 0018).
 */
function nextRunChange(current: TriggerRow, changes: Partial<TriggerRow>, scheduleChanged: boolean, now: Date): Partial<TriggerRow> {
  if (current.type !== 'search') return {};
  const active = (changes.active ?? current.active) === 1;
  if (!scheduleChanged && active === (current.active === 1)) return {};
  const from = current.last_tick_at !== null && current.last_tick_at > now.toISOString() ? new Date(current.last_tick_at) : now;
  const schedule = parseJson<StoredSchedule | null>(changes.schedule !== undefined ? changes.schedule : current.schedule, null);
  return { next_run_at: nextRunOf(schedule, from, active) };
}

export async function deleteTrigger(db: Db, ctx: RequestContext, triggerId: string, now: Date): Promise<void> {
  const row = await findTrigger(db, ctx.workspaceId, triggerId);
  if (!row) throw notFound('trigger');
  const at = now.toISOString();
  // Soft delete: runs keep pointing at it, no new run can start from it.
  await withinTransaction(db, async (tx) => {
    await updateTrigger(tx, triggerId, { deleted_at: at, updated_at: at, active: 0, next_run_at: null });
    await recordAudit(tx, ctx, at, [setupDeleted('trigger', triggerId, row.name)]);
  });
}

