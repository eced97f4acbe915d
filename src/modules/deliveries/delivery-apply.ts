/**
 * Applying one claimed delivery, in ONE transaction: records upserted, resource states written,
 * events raised, the runs they start planned, the wakes of waiting runs decided, the delivery
 * marked processed. A crash anywhere before the commit leaves nothing behind and the delivery is
 * claimed again once its lease runs out; after the commit the planned runs are created
 * (events/planned-runs.ts) and the wakes handed to the engine (event-wake.ts).
 *
 * The CPU work (JSON, FHIR validation) is done before the transaction opens, so the store's
 * write lock is held only for the writes.
 */
import type { Db } from '../../storage/database.js';
import type { Dialect } from '../../storage/connect.js';
import type { FhirValidator } from '../../ingestion/fhir-validate.js';
import { parseDeliveryBody, resourcesByFullUrl } from '../../ingestion/delivery-body.js';
import { checkItems } from '../../ingestion/check-items.js';
import { changesOf, touchedStateKeys, type RaisedEvent } from '../../ingestion/resource-changes.js';
import { planEventRuns, type EventOccurrence } from '../events/event-runs.js';
import { holdLease, markProcessed, type DeliveryRow, type ProcessedOutcome } from './delivery.repository.js';
import { readResourceStates, writeResourceStates } from './resource-state.repository.js';
import { applyRecordChanges } from './record-upsert.js';
import { wakesFor, type PendingWake } from './event-wake.js';

/** Problems kept on the delivery for its listing; the count covers all of them. */
const MAX_LISTED_PROBLEMS = 1000;

export type ClaimedDelivery = DeliveryRow;

export interface ApplyDeps {
  db: Db;
  dialect: Dialect;
  validator: FhirValidator;
}

export type ApplyResult =
  | { kind: 'processed'; plannedRunIds: string[]; wakes: PendingWake[]; outcome: ProcessedOutcome }
  /** another processor took the delivery over (this one was too slow): it does the work */
  | { kind: 'lease-lost' };

/** Thrown for a stored body that can no longer be read: retrying cannot help. */
export class UnreadableDeliveryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnreadableDeliveryError';
  }
}

function eventCounts(events: readonly RaisedEvent[]): { event: string; count: number }[] {
  const counts = new Map<string, number>();
  for (const { event } of events) counts.set(event, (counts.get(event) ?? 0) + 1);
  return [...counts].sort(([a], [b]) => (a < b ? -1 : 1)).map(([event, count]) => ({ event, count }));
}

function readItems(body: string, validator: FhirValidator) {
  let parsed;
  try {
    // Plain JSON.parse: the body passed secure-json-parse when it was received (no __proto__ or
    // constructor.prototype keys), and its scan would cost a second pass over megabytes.
    parsed = parseDeliveryBody(JSON.parse(body));
  } catch {
    // It passed the same checks when it was received; only a damaged row gets here.
    throw new UnreadableDeliveryError('the stored delivery body is no longer an accepted shape');
  }
  return checkItems(parsed, validator);
}

export async function applyDelivery(
  deps: ApplyDeps,
  delivery: ClaimedDelivery,
  body: string,
  owner: string,
  now: Date,
  leaseMs: number,
  planLeaseMs: number,
): Promise<ApplyResult> {
  const checked = readItems(body, deps.validator);
  const byFullUrl = resourcesByFullUrl(checked.items);
  const at = now.toISOString();
  const workspaceId = delivery.workspace_id;

  return deps.db.transaction().execute(async (tx): Promise<ApplyResult> => {
    if (!(await holdLease(tx, delivery.id, owner, new Date(now.getTime() + leaseMs).toISOString()))) {
      return { kind: 'lease-lost' };
    }
    const stored = await readResourceStates(tx, workspaceId, touchedStateKeys(checked.items));
    const changes = changesOf(checked.items, stored, byFullUrl);
    const patients = await applyRecordChanges(tx, workspaceId, changes.records, changes.referencedPatients, changes.formerPatients, at);
    await writeResourceStates(tx, workspaceId, changes.states, delivery.id, at);

    const occurrences: EventOccurrence[] = changes.events.map((raised) => ({
      event: raised.event,
      resource: raised.resource,
      subjectRecordId: raised.patientId === null ? null : patients.get(raised.patientId) ?? null,
    }));
    const context = {
      tenantId: delivery.tenant_id,
      workspaceId,
      requestId: delivery.request_id,
      keyId: null,
      keyName: 'carepath',
      owner,
      leaseExpiresAt: new Date(now.getTime() + planLeaseMs).toISOString(),
      at,
    };
    const { planned } = await planEventRuns(tx, deps.dialect, context, occurrences, {
      deliveryId: delivery.id,
      webhookId: delivery.webhook_id,
      idempotencyKey: delivery.idempotency_key,
    });
    const wakes = await wakesFor(tx, workspaceId, occurrences, delivery.id);

    const outcome: ProcessedOutcome = {
      problems: checked.problems.slice(0, MAX_LISTED_PROBLEMS),
      problemCount: checked.problems.length,
      events: eventCounts(changes.events),
      runsStarted: planned.length,
      pendingWakes: wakes.length === 0 ? null : JSON.stringify(wakes),
    };
    if (!(await markProcessed(tx, delivery.id, owner, at, context.leaseExpiresAt, outcome))) {
      throw new Error('the delivery changed state while it was being processed');
    }
    return { kind: 'processed', plannedRunIds: planned.map((row) => row.id), wakes, outcome };
  });
}
