/**
 * Applying one claimed delivery, in ONE transaction: records upserted, resource states written,
 * events raised, the runs they start planned, the wakes of waiting runs decided, the delivery
 * marked processed. Deliveries claimed together may share that transaction (`applyDeliveries`);
 * a delivery too large for one is applied a part at a time, each part in a transaction of its
 * own that also records how far it got (delivery-parts.ts).
 * A crash anywhere before a commit leaves nothing of that transaction behind and the deliveries
 * are claimed again once their leases run out; after the commit the planned runs are created
 * (events/planned-runs.ts) and the wakes handed to the engine (event-wake.ts).
 *
 * The CPU work (JSON, FHIR validation: the digest, delivery-reader.ts) is done before the
 * transaction opens, so the store's write lock is held only for the writes.
 */
import type { Transaction } from 'kysely';
import type { Database, Db } from '../../storage/database.js';
import type { Dialect } from '../../storage/connect.js';
import type { DeliveryDigest } from '../../ingestion/delivery-digest.js';
import type { DeliveryProblem } from '../../ingestion/delivery-body.js';
import { changesOf, touchedStateKeys, type DeliveryChanges, type RaisedEvent } from '../../ingestion/resource-changes.js';
import { findActiveEventTriggers, planEventRuns, type ConditionFailures, type EventOccurrence, type EventTrigger } from '../events/event-runs.js';
import { holdLeases, holdLeasesSqlite, markProcessed, markProcessedSqlite, type DeliveryRow, type ProcessedOutcome } from './delivery.repository.js';
import { readResourceStates, writeResourceStates } from './resource-state.repository.js';
import { readResourceStatesSqlite, writeResourceStatesSqlite } from './resource-state-sqlite.js';
import { applyRecordChanges, kyselyRecordStore } from './record-upsert.js';
import { lockTouchedResources } from './resource-locks.js';
import { sqliteRecordStore } from './record-store-sqlite.js';
import { sqliteDeliveryStatementsOf, type SqliteDeliveryStatements } from './sqlite-delivery-statements.js';
import { subjectsOf, subjectsThatMayWait, wakesFor, type PendingWake } from './event-wake.js';
import { auditEntry, writeAuditEntries } from '../audit/audit.repository.js';
import { addEventCounts, deleteProgress, NO_PROGRESS, readProgress, writeProgress, type DeliveryProgress, type EventCount } from './delivery-parts.js';
import { systemContext } from '../../auth/context.js';
import { readStoreNow } from '../../storage/store-clock.js';

/** Problems kept on the delivery for its listing; the count covers all of them. */
const MAX_LISTED_PROBLEMS = 1000;

export type ClaimedDelivery = DeliveryRow;

export interface ApplyDeps {
  db: Db;
  dialect: Dialect;
}

export type ApplyResult =
  | { kind: 'processed'; plannedRunIds: string[]; wakes: PendingWake[]; outcome: ProcessedOutcome; conditionFailures: ConditionFailures }
  /** a part of a delivery applied in parts, not its last: the runs it planned are to be created, and the next part applied */
  | { kind: 'part-applied'; plannedRunIds: string[]; appliedItems: number; wakes: PendingWake[]; conditionFailures: ConditionFailures }
  /** another processor took the delivery over (this one was too slow): it does the work */
  | { kind: 'lease-lost' };

/** Thrown for a stored body that can no longer be read: retrying cannot help. */
export class UnreadableDeliveryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnreadableDeliveryError';
  }
}

const eventCounts = (events: readonly RaisedEvent[]): EventCount[] => addEventCounts([], events.map(({ event }) => ({ event, count: 1 })));

/** A claimed delivery with its CPU work done: its body digested (items checked against the FHIR schema). */
export interface PreparedDelivery {
  delivery: ClaimedDelivery;
  digest: DeliveryDigest;
  /**
   * Set when the delivery is applied in parts (delivery-parts.ts): each transaction applies the
   * next this many items after those its progress says are applied. Alone in its group.
   */
  partItems?: number;
}

/** The items of a delivery applied in parts that one transaction applies. */
interface Part {
  from: number;
  to: number;
  of: number;
  /** what the parts before it did */
  before: DeliveryProgress;
}

/** Applies one delivery in its own transaction. */
export async function applyDelivery(
  deps: ApplyDeps,
  prepared: PreparedDelivery,
  owner: string,
  now: Date,
  leaseMs: number,
  planLeaseMs: number,
): Promise<ApplyResult> {
  const [result] = await applyDeliveries(deps, [prepared], owner, now, leaseMs, planLeaseMs);
  return result;
}

/**
 * Applies deliveries (one, or several claimed together), in id order, in ONE transaction (group
 * commit): each one's records, states, planned runs and wakes are exactly what applying it
 * alone would give, and each sees what the ones before it wrote, so the outcome is that of
 * applying them one after the other. What they share: the commit (on SQLite the largest single
 * cost of a small delivery), one lease statement, and one read per workspace of its event
 * triggers and of the subjects whose runs may wait. All commit or none does; the processor
 * applies them one by one when a group fails, so one bad delivery fails alone.
 */
export async function applyDeliveries(
  deps: ApplyDeps,
  group: readonly PreparedDelivery[],
  owner: string,
  now: Date,
  leaseMs: number,
  planLeaseMs: number,
): Promise<ApplyResult[]> {
  // SQLite: the per-delivery statements run prepared, on the connection this transaction holds.
  const hot = deps.dialect === 'sqlite' ? sqliteDeliveryStatementsOf(deps.db) : undefined;
  return deps.db.transaction().execute(async (tx) => {
    const ids = group.map((p) => p.delivery.id);
    const until = new Date(now.getTime() + leaseMs).toISOString();
    const held = hot ? holdLeasesSqlite(hot, ids, owner) : await holdLeases(tx, ids, owner, until);
    // Another processor took over the ones not held (this one was too slow): it does their work.
    const mine = group.filter((p) => held.has(p.delivery.id));
    // A delivery applied in parts is cut down here to its next part: its progress is read in the
    // transaction that moves it on, under the lease just held.
    const parts = new Map<string, Part>();
    for (const [i, prepared] of mine.entries()) {
      if (prepared.partItems === undefined) continue;
      const { part, slice } = await nextPart(tx, prepared, prepared.partItems);
      parts.set(prepared.delivery.id, part);
      mine[i] = slice;
    }
    // PostgreSQL: another process may be applying a delivery about the same resources; it
    // finishes first and these read what it wrote (resource-locks.ts). SQLite has one writer.
    if (deps.dialect === 'postgres') await lockTouchedResources(tx, touchedByWorkspace(mine));
    const written: Written[] = [];
    for (const prepared of mine) {
      written.push({ ...(await writeRecordsAndStates(tx, deps.dialect, hot, prepared, now.toISOString())), part: parts.get(prepared.delivery.id) });
    }

    const triggers = new Map<string, EventTrigger[]>();
    const mayWait = new Map<string, Set<string>>();
    for (const [workspaceId, members] of byWorkspace(written)) {
      const occurrences = members.flatMap((w) => w.occurrences);
      const events = [...new Set(occurrences.map((o) => o.event))];
      triggers.set(workspaceId, events.length === 0 ? [] : await findActiveEventTriggers(tx, workspaceId, events));
      mayWait.set(workspaceId, await subjectsThatMayWait(tx, workspaceId, subjectsOf(occurrences)));
    }
    // When its events are raised, for the runs that may wait for them: from the store's clock,
    // with the patients' rows held, so that a wait on one of them began wholly before or wholly
    // after (engine/event-waits.ts). Most groups wake no one: no wake, no round trip for the clock.
    const raisedAt = [...mayWait.values()].some((subjects) => subjects.size > 0) ? await readStoreNow(tx) : now.toISOString();

    const results = new Map<string, ApplyResult>();
    for (const w of written) {
      const workspaceId = w.prepared.delivery.workspace_id;
      results.set(
        w.prepared.delivery.id,
        await finishDelivery(tx, deps.dialect, hot, w, triggers.get(workspaceId)!, { subjects: mayWait.get(workspaceId)!, raisedAt }, owner, now, planLeaseMs),
      );
    }
    // Health data came in: who sent it, whose it is, what it started (one row per delivery, and its
    // rows in the index by record; one statement on PostgreSQL, two on SQLite).
    if (written.length > 0) {
      await writeAuditEntries(
        tx,
        written.map((w) => deliveryAuditEntry(w, results.get(w.prepared.delivery.id)!, now.toISOString())),
      );
    }
    return group.map((p) => results.get(p.delivery.id) ?? { kind: 'lease-lost' });
  });
}

/**
 * The next part of a delivery applied in parts: the items after those its progress says are
 * applied. Its digest carries the problems (skipped entries) on the last part only, which lists
 * them on the delivery.
 */
async function nextPart(tx: Transaction<Database>, prepared: PreparedDelivery, partItems: number): Promise<{ part: Part; slice: PreparedDelivery }> {
  const { items, problems } = prepared.digest;
  const before = await readProgress(tx, prepared.delivery.id);
  const from = Math.min(before.appliedItems, items.length);
  const to = Math.min(from + partItems, items.length);
  const last = to === items.length;
  const slice = { ...prepared, digest: { ...prepared.digest, items: items.slice(from, to), problems: last ? problems : [] } };
  return { part: { from, to, of: items.length, before }, slice };
}

/** Per workspace, the resources the deliveries touch. */
function touchedByWorkspace(group: readonly PreparedDelivery[]): Map<string, Set<string>> {
  const touched = new Map<string, Set<string>>();
  for (const { delivery, digest } of group) {
    const keys = touched.get(delivery.workspace_id) ?? new Set<string>();
    for (const key of touchedStateKeys(digest.items)) keys.add(key);
    touched.set(delivery.workspace_id, keys);
  }
  return touched;
}

/** One delivery's records and states written, with the events it raised (subjects resolved). */
interface Written {
  prepared: PreparedDelivery;
  changes: DeliveryChanges;
  occurrences: EventOccurrence[];
  /** The records of the patients its resources belong to (Patient id → record id). */
  patients: ReadonlyMap<string, string>;
  /** The records of the Patients it deleted. */
  removedPatientRecords: readonly string[];
  /** For a delivery applied in parts: which part this is. */
  part?: Part;
}

async function writeRecordsAndStates(
  tx: Transaction<Database>,
  dialect: Dialect,
  hot: SqliteDeliveryStatements | undefined,
  prepared: PreparedDelivery,
  at: string,
): Promise<Omit<Written, 'part'>> {
  const { delivery, digest } = prepared;
  const workspaceId = delivery.workspace_id;
  const keys = touchedStateKeys(digest.items);
  const stored = hot ? readResourceStatesSqlite(hot, workspaceId, keys) : await readResourceStates(tx, dialect, workspaceId, keys);
  const changes = changesOf(digest.items, stored);
  const records = hot ? sqliteRecordStore(hot, workspaceId) : kyselyRecordStore(tx, workspaceId);
  const { patients, removedPatientRecords } = await applyRecordChanges(records, changes.records, changes.referencedPatients, changes.formerPatients, at);
  if (hot) writeResourceStatesSqlite(hot, workspaceId, changes.states, delivery.id, at);
  else await writeResourceStates(tx, dialect, workspaceId, changes.states, delivery.id, at);
  const occurrences: EventOccurrence[] = changes.events.map((raised) => ({
    event: raised.event,
    resourceJson: raised.resourceJson,
    subjectRecordId: raised.patientId === null ? null : patients.get(raised.patientId) ?? null,
  }));
  return { prepared, changes, occurrences, patients, removedPatientRecords };
}

/**
 * The runs its events start planned, its wakes decided, the delivery marked processed; or, for a
 * part before the last of a delivery applied in parts, its progress moved on.
 */
async function finishDelivery(
  tx: Transaction<Database>,
  dialect: Dialect,
  hot: SqliteDeliveryStatements | undefined,
  { prepared: { delivery, digest }, changes, occurrences, part }: Written,
  triggers: readonly EventTrigger[],
  /** The subjects with a run that may be waiting, and when the events were raised (the store's clock, under the locks). */
  waiting: { subjects: ReadonlySet<string>; raisedAt: string },
  owner: string,
  now: Date,
  planLeaseMs: number,
): Promise<ApplyResult> {
  const at = now.toISOString();
  const context = {
    tenantId: delivery.tenant_id,
    workspaceId: delivery.workspace_id,
    requestId: delivery.request_id,
    keyId: null,
    keyName: 'carepath',
    owner,
    leaseExpiresAt: new Date(now.getTime() + planLeaseMs).toISOString(),
    at,
  };
  const { planned, conditionFailures } = await planEventRuns(
    tx,
    dialect,
    context,
    occurrences,
    { deliveryId: delivery.id, webhookId: delivery.webhook_id, idempotencyKey: delivery.idempotency_key },
    triggers,
  );
  const before = part?.before ?? NO_PROGRESS;
  const sofar: DeliveryProgress = {
    appliedItems: part?.to ?? digest.items.length,
    events: addEventCounts(before.events, eventCounts(changes.events)),
    runsStarted: before.runsStarted + planned.length,
    // Wakes not handed over yet (a process died after the part before committed), and this part's.
    pendingWakes: [...before.pendingWakes, ...wakesFor(occurrences, waiting.subjects, delivery.id, waiting.raisedAt)],
    skipped: [...before.skipped, ...changes.stale],
  };
  const plannedRunIds = planned.map((row) => row.id);
  if (part && part.to < part.of) {
    // The transaction began by making sure this processor still holds the delivery (holdLeases).
    await writeProgress(tx, delivery.id, sofar, at);
    return { kind: 'part-applied', plannedRunIds, appliedItems: part.to, wakes: sofar.pendingWakes, conditionFailures };
  }
  const wakes = sofar.pendingWakes;
  const skipped = skippedItems(digest.problems, sofar.skipped);
  const outcome: ProcessedOutcome = {
    problems: skipped.slice(0, MAX_LISTED_PROBLEMS),
    problemCount: skipped.length,
    events: sofar.events,
    runsStarted: sofar.runsStarted,
    pendingWakes: wakes.length === 0 ? null : JSON.stringify(wakes),
  };
  const marked = hot
    ? markProcessedSqlite(hot, delivery.id, owner, at, context.leaseExpiresAt, outcome)
    : await markProcessed(tx, delivery.id, owner, at, context.leaseExpiresAt, outcome);
  if (!marked) {
    throw new Error('the delivery changed state while it was being processed');
  }
  if (part) await deleteProgress(tx, delivery.id);
  return { kind: 'processed', plannedRunIds, wakes, outcome, conditionFailures };
}

/**
 * Every skipped item of a delivery in index order: those its body's checks refused (the digest's
 * problems) and those applying it found older than the version stored.
 */
function skippedItems(refused: readonly DeliveryProblem[], stale: readonly DeliveryProblem[]): DeliveryProblem[] {
  if (stale.length === 0) return [...refused];
  return [...refused, ...stale].sort((a, b) => a.index - b.index);
}

function byWorkspace(written: readonly Written[]): Map<string, Written[]> {
  const groups = new Map<string, Written[]>();
  for (const w of written) {
    const id = w.prepared.delivery.workspace_id;
    groups.set(id, [...(groups.get(id) ?? []), w]);
  }
  return groups;
}

/**
 * The `delivery.process` audit event of an applied delivery, written in its transaction: the
 * endpoint that sent it (the sender proved its secret; there is no API key), the records of the
 * patients whose data it held (record ids, never the data or the patients' own ids, which may be
 * medical record numbers), how many resources of each type it took, and the runs it started.
 * A delivery applied in parts has one per part, each with the items it covers (`items`).
 * Found by each of those records (`recordId`), through the index rows written with it.
 */
function deliveryAuditEntry(w: Written, result: ApplyResult, at: string) {
  const { delivery, digest } = w.prepared;
  const { part } = w;
  const resources: Record<string, number> = {};
  for (const item of digest.items) {
    const type = item.kind === 'resource' ? item.resourceType : item.record.resourceType;
    resources[type] = (resources[type] ?? 0) + 1;
  }
  const ctx = { ...systemContext(delivery.tenant_id, delivery.workspace_id, delivery.request_id), keyName: `webhook:${delivery.webhook_id}` };
  return auditEntry(ctx, at, {
    action: 'delivery.process',
    resourceType: 'delivery',
    resourceId: delivery.id,
    details: {
      webhookId: delivery.webhook_id,
      // A deleted Patient's record too: the delivery touched that patient's data last.
      patientRecordIds: [...new Set([...w.patients.values(), ...w.removedPatientRecords])].sort(),
      resources,
      skipped: digest.problems.length + w.changes.stale.length,
      runsStarted: result.kind === 'lease-lost' ? 0 : result.plannedRunIds.length,
      ...(part ? { items: { from: part.from, to: part.to, of: part.of } } : {}),
    },
  });
}
