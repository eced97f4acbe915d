/**
 * Event triggers (DESIGN §7): each active event trigger whose `event` equals a raised event
 * starts one run per occurrence, with payload `{event, resource, deliveryId}`, the patient the
 * resource belongs to as subject and the delivery's Idempotency-Key on the run.
 *
 * A trigger with a condition (`when`, FHIRPath over `{payload}`) starts a run only for the
 * occurrences that meet it, so a trigger on `Condition.created` can start runs for one diagnosis
 * only instead of for every Condition the feed sends.
 *
 * onePerSubject (default false for event triggers): no run starts for a subject that already has
 * a run of that trigger that is not terminal, or one planned, including earlier in this same
 * delivery. A run without a subject (a resource that belongs to no patient) is never held back.
 */
import type { DbOrTx } from '../../storage/database.js';
import type { Dialect } from '../../storage/connect.js';
import { listParameter, runHot, type HotStatement } from '../../storage/hot-statement.js';
import { insertPlannedRuns, lockTriggers, subjectKey, subjectsWithLiveRuns, type PlannedRunRow } from './planned-runs.repository.js';
import { plannedRun, type PlanContext, type TriggerForRuns } from './run-plan.js';
import { evaluateBoolean, ExpressionCache, ExpressionEvaluationError, ExpressionSyntaxError } from '../../lib/fhirpath.js';

export interface EventOccurrence {
  event: string;
  /** the resource as delivered, as JSON text (ingestion/delivery-digest.ts) */
  resourceJson: string;
  subjectRecordId: string | null;
}

/**
 * A run's payload `{event, resource, deliveryId}` as JSON text, the resource spliced in as it
 * came (JSON text already; parsing it only to stringify it again would be wasted work). The
 * same text JSON.stringify gives for the object, keys in the same order.
 */
export function eventPayloadJson(event: string, resourceJson: string, deliveryId: string): string {
  return `{"event":${JSON.stringify(event)},"resource":${resourceJson},"deliveryId":${JSON.stringify(deliveryId)}}`;
}

export interface EventTrigger extends TriggerForRuns {
  event: string;
  /** FHIRPath a run must meet to start (`{payload}` as its root), or null: every event starts one. */
  when_expression: string | null;
}

/**
 * Compiled conditions of event triggers, by their text. Only the compiled text is kept, never a
 * value it was evaluated on, so sharing it across workspaces shares nothing of theirs.
 */
const conditions = new ExpressionCache(500);

/**
 * Whether an event's run meets its trigger's condition. A condition that fails on this resource
 * (more than one item where one Boolean was wanted, a type error) does not hold: no run starts,
 * as for a condition that is false; but it is told apart (`failed`), for the log to say so.
 */
function meetsCondition(when: string, payload: () => unknown): boolean | 'failed' {
  try {
    return evaluateBoolean(conditions.compile(when), { payload: payload(), subject: {}, steps: {}, vars: {} });
  } catch (error) {
    if (error instanceof ExpressionEvaluationError || error instanceof ExpressionSyntaxError) return 'failed';
    throw error;
  }
}

/**
 * Per trigger, how many of a delivery's events its condition failed on (an error, not false).
 * Such a trigger held back runs it may have been meant to start, and nothing else would say so.
 */
export type ConditionFailures = Map<string, number>;

export interface EventRunSource {
  deliveryId: string;
  webhookId: string;
  idempotencyKey: string | null;
}

/** Read once per group of deliveries: prepared (storage/hot-statement.ts), the events as one list parameter. */
const EVENT_TRIGGERS_TEXT = (events: string) => `
  select t.id, t.event, t.when_expression, t.source_id, t.auto_start, t.one_per_subject, d.name as blueprint_name, d.version as blueprint_version
  from triggers t join diagrams d on d.id = t.source_id and d.type = 'blueprint'
  where t.workspace_id = $W and t.type = 'event' and t.active = 1 and t.deleted_at is null and t.event ${events}
  order by t.id`;
const EVENT_TRIGGERS: HotStatement = {
  name: 'carepath_active_event_triggers_v2',
  sqlite: EVENT_TRIGGERS_TEXT('in (select value from json_each(?))').replace('$W', '?'),
  postgres: EVENT_TRIGGERS_TEXT('= any($2::text[])').replace('$W', '$1'),
};

/** Active, live event triggers of the workspace listening to any of `events`, with their blueprint. */
export async function findActiveEventTriggers(db: DbOrTx, workspaceId: string, events: readonly string[]): Promise<EventTrigger[]> {
  return runHot<EventTrigger>(db, EVENT_TRIGGERS, (dialect) => [workspaceId, listParameter(dialect, [...new Set(events)])]);
}

/**
 * Plans the runs the occurrences start (inside the caller's transaction) and stores them as
 * planned runs held by `context.owner`. `triggers`: the workspace's active event triggers for
 * (at least) these events, from `findActiveEventTriggers` in the same transaction (read once for
 * deliveries applied together). Returns the planned rows, how many runs onePerSubject held back,
 * and the triggers whose condition failed on some occurrences.
 */
export async function planEventRuns(
  db: DbOrTx,
  dialect: Dialect,
  context: PlanContext,
  occurrences: readonly EventOccurrence[],
  source: EventRunSource,
  triggers: readonly EventTrigger[],
): Promise<{ planned: PlannedRunRow[]; skipped: number; conditionFailures: ConditionFailures }> {
  const raised = new Set(occurrences.map((o) => o.event));
  const byEvent = new Map<string, EventTrigger[]>();
  for (const trigger of triggers) {
    if (raised.has(trigger.event)) byEvent.set(trigger.event, [...(byEvent.get(trigger.event) ?? []), trigger]);
  }
  const conditionFailures: ConditionFailures = new Map();
  if (byEvent.size === 0) return { planned: [], skipped: 0, conditionFailures };
  const onePerSubject = [...byEvent.values()].flat().filter((trigger) => trigger.one_per_subject === 1).map((trigger) => trigger.id);
  await lockTriggers(db, dialect, onePerSubject);
  const subjects = occurrences.flatMap((o) => (o.subjectRecordId !== null && byEvent.has(o.event) ? [o.subjectRecordId] : []));
  const live = await subjectsWithLiveRuns(db, onePerSubject, subjects);

  const planned: PlannedRunRow[] = [];
  let skipped = 0;
  for (const occurrence of occurrences) {
    // Parsed once, and only when a trigger of this event has a condition to evaluate on it.
    let payload: unknown;
    const payloadOf = () => (payload ??= JSON.parse(eventPayloadJson(occurrence.event, occurrence.resourceJson, source.deliveryId)));
    for (const trigger of byEvent.get(occurrence.event) ?? []) {
      if (trigger.when_expression !== null) {
        const met = meetsCondition(trigger.when_expression, payloadOf);
        if (met === 'failed') conditionFailures.set(trigger.id, (conditionFailures.get(trigger.id) ?? 0) + 1);
        if (met !== true) continue;
      }
      const subject = occurrence.subjectRecordId;
      if (trigger.one_per_subject === 1 && subject !== null) {
        const key = subjectKey(trigger.id, subject);
        if (live.has(key)) {
          skipped++;
          continue;
        }
        live.add(key);
      }
      planned.push(
        plannedRun(trigger, context, {
          subjectRecordId: subject,
          payloadJson: eventPayloadJson(occurrence.event, occurrence.resourceJson, source.deliveryId),
          idempotencyKey: source.idempotencyKey,
          origin: { via: 'event', event: occurrence.event, deliveryId: source.deliveryId, webhookId: source.webhookId },
        }),
      );
    }
  }
  await insertPlannedRuns(db, planned);
  return { planned, skipped, conditionFailures };
}
