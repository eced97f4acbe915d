/**
 * SQL of stored deliveries. A delivery moves received → processing → processed | failed; a
 * processor holds a lease while it works, and a lease that runs out (the process died) lets any
 * processor claim the delivery again.
 */
import type { Kysely } from 'kysely';
import type { Database, DbOrTx, DeliveryStatus, DeliveryTable } from '../../storage/database.js';
import type { Dialect } from '../../storage/connect.js';
import { newestFirstPage, type Page } from '../../lib/cursor.js';
import { parseJson } from '../../lib/json.js';
import { chunks, ID_CHUNK } from '../events/sql-chunks.js';
import {
  COLUMNS_WITHOUT_BODY,
  DELIVERY_COLUMNS,
  sqliteDeliveryStatementsOf,
  type SqliteDeliveryStatements,
} from './sqlite-delivery-statements.js';

export type DeliveryRow = DeliveryTable;

/** A delivery as `GET /v1/webhooks/{webhookId}/deliveries` shows it: counts and codes, never content. */
export interface DeliveryView {
  deliveryId: string;
  status: DeliveryRow['status'];
  idempotencyKey: string | null;
  receivedAt: string;
  processedAt: string | null;
  attempts: number;
  accepted: number;
  skippedCount: number;
  skipped: { index: number; message: string }[];
  events: { event: string; count: number }[];
  runsStarted: number;
  error: string | null;
}

export function toDeliveryView(row: Omit<DeliveryRow, 'body'>): DeliveryView {
  return {
    deliveryId: row.id,
    status: row.status,
    idempotencyKey: row.idempotency_key,
    receivedAt: row.received_at,
    processedAt: row.processed_at,
    attempts: row.attempts,
    accepted: row.accepted,
    skippedCount: row.problem_count,
    skipped: parseJson<DeliveryView['skipped']>(row.problems, []),
    events: parseJson<DeliveryView['events']>(row.events, []),
    runsStarted: row.runs_started,
    error: row.error,
  };
}

/** Inserts a delivery; false when its (endpoint, Idempotency-Key) was stored before. */
export async function insertDelivery(db: DbOrTx, row: DeliveryRow): Promise<boolean> {
  const inserted = await db
    .insertInto('deliveries')
    .values(row)
    // Either unique key: (webhook_id, idempotency_key), or (webhook_id, signature_t, body_sha256).
    .onConflict((oc) => oc.doNothing())
    .returning('id')
    .execute();
  return inserted.length > 0;
}

/**
 * `insertDelivery` on SQLite through its prepared statement. Synchronous: the caller holds the
 * connection (`db.connection()`), so the INSERT commits on its own, outside anyone's transaction.
 */
export function insertDeliverySqlite(s: SqliteDeliveryStatements, row: DeliveryRow): boolean {
  return s.insertDelivery.run(...DELIVERY_COLUMNS.map((column) => row[column])).changes === 1;
}

/**
 * The delivery this endpoint took before under this Idempotency-Key, or with this body signed at
 * this `t` (under any key, or none): what a replay is answered with.
 */
export async function findEarlierDelivery(
  db: DbOrTx,
  webhookId: string,
  taken: { idempotencyKey: string } | { signatureT: string; bodySha256: string },
): Promise<Pick<DeliveryRow, 'id' | 'body_sha256' | 'accepted' | 'idempotency_key'> | undefined> {
  let query = db.selectFrom('deliveries').select(['id', 'body_sha256', 'accepted', 'idempotency_key']).where('webhook_id', '=', webhookId);
  query =
    'idempotencyKey' in taken
      ? query.where('idempotency_key', '=', taken.idempotencyKey)
      : query.where('signature_t', '=', taken.signatureT).where('body_sha256', '=', taken.bodySha256);
  return query.executeTakeFirst();
}

export async function findDelivery(db: DbOrTx, deliveryId: string): Promise<DeliveryRow | undefined> {
  return db.selectFrom('deliveries').selectAll().where('id', '=', deliveryId).executeTakeFirst();
}

/**
 * Claims up to `limit` deliveries for `owner`, oldest first: received ones, and processing ones
 * whose lease ran out. PostgreSQL locks the candidates with SKIP LOCKED, so processors claiming
 * at once take different rows; SQLite has one writer at a time, so the UPDATE alone is enough.
 * The bodies come back with the claim (the processor needs them next, and one statement
 * carrying them costs less than one read per delivery) unless `withBodies` is false: a
 * processor that was handed the parsed bodies in memory (parsed-handoff.ts) reads only the
 * ones it lacks (`readDeliveryBodies`), and their `body` is null here.
 */
export async function claimDeliveries(
  db: Kysely<Database>,
  dialect: Dialect,
  owner: string,
  now: string,
  leaseExpiresAt: string,
  limit: number,
  withBodies = true,
): Promise<DeliveryRow[]> {
  const hot = dialect === 'sqlite' ? sqliteDeliveryStatementsOf(db) : undefined;
  const claimed = hot
    ? await db.connection().execute(async () =>
        (withBodies ? hot.claimWithBodies : hot.claim).all(owner, leaseExpiresAt, now, limit, now) as Partial<DeliveryRow>[],
      )
    : await claimWithKysely(db, dialect, owner, now, leaseExpiresAt, limit, withBodies);
  return claimed
    .map((row) => ({ ...row, body: row.body ?? null }) as DeliveryRow)
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** The claim built with Kysely (PostgreSQL: SKIP LOCKED); SQLite runs the same UPDATE prepared. */
async function claimWithKysely(
  db: Kysely<Database>,
  dialect: Dialect,
  owner: string,
  now: string,
  leaseExpiresAt: string,
  limit: number,
  withBodies: boolean,
): Promise<Partial<DeliveryRow>[]> {
  return db
    .updateTable('deliveries')
    .set((eb) => ({
      status: 'processing' as const,
      lease_owner: owner,
      lease_expires_at: leaseExpiresAt,
      attempts: eb('attempts', '+', 1),
    }))
    .where('id', 'in', (eb) => {
      const candidates = eb
        .selectFrom('deliveries')
        .select('id')
        .where((w) =>
          w.or([
            w('status', '=', 'received'),
            w.and([w('status', '=', 'processing'), w('lease_expires_at', '<', now)]),
          ]),
        )
        .orderBy('id')
        .limit(limit);
      return dialect === 'postgres' ? candidates.forUpdate().skipLocked() : candidates;
    })
    .where((w) =>
      w.or([w('status', '=', 'received'), w.and([w('status', '=', 'processing'), w('lease_expires_at', '<', now)])]),
    )
    .returning(withBodies ? [...COLUMNS_WITHOUT_BODY, 'body'] : [...COLUMNS_WITHOUT_BODY])
    .execute();
}

/** The stored bodies of these deliveries (id → body; a missing or null body is left out). */
export async function readDeliveryBodies(db: DbOrTx, deliveryIds: readonly string[]): Promise<Map<string, string>> {
  const bodies = new Map<string, string>();
  if (deliveryIds.length === 0) return bodies;
  const rows = await db.selectFrom('deliveries').select(['id', 'body']).where('id', 'in', deliveryIds).execute();
  for (const row of rows) if (row.body !== null) bodies.set(row.id, row.body);
  return bodies;
}

/**
 * First statement of the processing transaction: extends the leases `owner` still holds of these
 * deliveries and returns their ids (the others were lost). On PostgreSQL it also locks the rows
 * until commit, so no one can claim them meanwhile; on SQLite it takes the write lock at the
 * start of the transaction.
 */
export async function holdLeases(db: DbOrTx, deliveryIds: readonly string[], owner: string, leaseExpiresAt: string): Promise<Set<string>> {
  const rows = await db
    .updateTable('deliveries')
    .set({ lease_expires_at: leaseExpiresAt })
    .where('id', 'in', deliveryIds)
    .where('status', '=', 'processing')
    .where('lease_owner', '=', owner)
    .returning('id')
    .execute();
  return new Set(rows.map((row) => row.id));
}

/**
 * `holdLeases` on SQLite, inside the processing transaction: which of the deliveries this owner
 * still holds. A read suffices: the transaction took the database's write lock when it began
 * (BEGIN IMMEDIATE), so no other process can take a lease over before it commits, and its commit
 * marks them processed. The UPDATE that extends leases on PostgreSQL would rewrite each row
 * whole on SQLite, its stored body included (about 100 KiB a 30-resource delivery, written to
 * the WAL a second time after the intake's INSERT).
 */
export function holdLeasesSqlite(s: SqliteDeliveryStatements, deliveryIds: readonly string[], owner: string): Set<string> {
  const rows = s.heldLeases.all(JSON.stringify(deliveryIds), owner) as { id: string }[];
  return new Set(rows.map((row) => row.id));
}

export interface ProcessedOutcome {
  problems: { index: number; message: string }[];
  problemCount: number;
  events: { event: string; count: number }[];
  runsStarted: number;
  /** JSON of wakes still to hand to waiting runs, or null */
  pendingWakes: string | null;
}

/**
 * Marks the delivery processed and drops its body: its data now lives in records and states.
 * While wakes are pending the processor keeps its lease on the row (until `leaseExpiresAt`).
 */
export async function markProcessed(
  db: DbOrTx,
  deliveryId: string,
  owner: string,
  at: string,
  leaseExpiresAt: string,
  outcome: ProcessedOutcome,
): Promise<boolean> {
  const pending = outcome.pendingWakes !== null;
  const result = await db
    .updateTable('deliveries')
    .set({
      status: 'processed',
      processed_at: at,
      body: null,
      lease_owner: pending ? owner : null,
      lease_expires_at: pending ? leaseExpiresAt : null,
      pending_wakes: outcome.pendingWakes,
      problems: JSON.stringify(outcome.problems),
      problem_count: outcome.problemCount,
      events: JSON.stringify(outcome.events),
      runs_started: outcome.runsStarted,
      error: null,
    })
    .where('id', '=', deliveryId)
    .where('status', '=', 'processing')
    .where('lease_owner', '=', owner)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** `markProcessed` on SQLite through its prepared statement (inside the processing transaction). */
export function markProcessedSqlite(
  s: SqliteDeliveryStatements,
  deliveryId: string,
  owner: string,
  at: string,
  leaseExpiresAt: string,
  outcome: ProcessedOutcome,
): boolean {
  const pending = outcome.pendingWakes !== null;
  const { changes } = s.markProcessed.run(
    at,
    pending ? owner : null,
    pending ? leaseExpiresAt : null,
    outcome.pendingWakes,
    JSON.stringify(outcome.problems),
    outcome.problemCount,
    JSON.stringify(outcome.events),
    outcome.runsStarted,
    deliveryId,
    owner,
  );
  return changes === 1;
}

/**
 * Hands deliveries claimed by `owner` but not started back to `received` (a processor stopping
 * with deliveries claimed for it at intake), so the next processor need not wait for the lease.
 */
export async function releaseDeliveries(db: DbOrTx, deliveryIds: readonly string[], owner: string): Promise<void> {
  for (const chunk of chunks(deliveryIds, ID_CHUNK)) {
    await db
      .updateTable('deliveries')
      .set((eb) => ({ status: 'received' as const, lease_owner: null, lease_expires_at: null, attempts: eb('attempts', '-', 1) }))
      .where('id', 'in', chunk)
      .where('status', '=', 'processing')
      .where('lease_owner', '=', owner)
      .execute();
  }
}

/** Extends the leases `owner` holds on deliveries still `processing` (a heartbeat while they are worked on). */
export async function extendDeliveryLeases(db: DbOrTx, deliveryIds: readonly string[], owner: string, until: string): Promise<void> {
  for (const chunk of chunks(deliveryIds, ID_CHUNK)) {
    await db
      .updateTable('deliveries')
      .set({ lease_expires_at: until })
      .where('id', 'in', chunk)
      .where('status', '=', 'processing')
      .where('lease_owner', '=', owner)
      .execute();
  }
}

/** Marks the delivery failed; the body is kept so an operator can look into it. */
export async function markFailed(db: DbOrTx, deliveryId: string, owner: string, at: string, error: string): Promise<void> {
  await db
    .updateTable('deliveries')
    .set({ status: 'failed', processed_at: at, lease_owner: null, lease_expires_at: null, error })
    .where('id', '=', deliveryId)
    .where('status', '=', 'processing')
    .where('lease_owner', '=', owner)
    .execute();
}

export interface DeliveryListQuery {
  limit: number;
  cursor?: string;
  /** Only deliveries in this state (an operator looking for `failed` ones). */
  status?: DeliveryStatus;
}

/** Newest first, keyset-paged on the time-ordered id. */
export async function listDeliveries(db: DbOrTx, webhookId: string, query: DeliveryListQuery): Promise<Page<DeliveryView>> {
  let select = db.selectFrom('deliveries').select(COLUMNS_WITHOUT_BODY).where('webhook_id', '=', webhookId);
  if (query.status) select = select.where('status', '=', query.status);
  const page = await newestFirstPage(select, query, toDeliveryView, 'deliveries');
  await showProgress(db, page.data);
  return page;
}

/**
 * A delivery applied in parts (delivery-parts.ts) that is not processed yet shows the events and
 * runs of the parts applied so far, kept in its progress row until the last part.
 */
async function showProgress(db: DbOrTx, views: DeliveryView[]): Promise<void> {
  const unfinished = views.filter((view) => view.status !== 'processed');
  if (unfinished.length === 0) return;
  const rows = await db
    .selectFrom('delivery_progress')
    .select(['delivery_id', 'events', 'runs_started'])
    .where('delivery_id', 'in', unfinished.map((view) => view.deliveryId))
    .execute();
  const progress = new Map(rows.map((row) => [row.delivery_id, row]));
  for (const view of unfinished) {
    const row = progress.get(view.deliveryId);
    if (!row) continue;
    view.events = parseJson<DeliveryView['events']>(row.events, []);
    view.runsStarted = row.runs_started;
  }
}

/**
 * A failed delivery back to `received`, with its attempts, error and times cleared, so a
 * processor takes it again: what an operator does once the cause is fixed (a bug, a lost
 * database). Only a failed delivery whose body was kept can go back. Answers the delivery's
 * webhook, workspace and former error, or why it cannot.
 */
export async function requeueFailedDelivery(
  db: DbOrTx,
  deliveryId: string,
): Promise<{ kind: 'requeued'; webhookId: string; workspaceId: string; tenantId: string; error: string | null } | { kind: 'not-found' } | { kind: 'not-failed'; status: string } | { kind: 'no-body' }> {
  const row = await db
    .selectFrom('deliveries')
    .select(['webhook_id', 'workspace_id', 'tenant_id', 'status', 'error', (eb) => eb('body', 'is not', null).as('has_body')])
    .where('id', '=', deliveryId)
    .executeTakeFirst();
  if (!row) return { kind: 'not-found' };
  if (row.status !== 'failed') return { kind: 'not-failed', status: row.status };
  if (!row.has_body) return { kind: 'no-body' };
  const moved = await db
    .updateTable('deliveries')
    .set({ status: 'received', attempts: 0, error: null, processed_at: null, lease_owner: null, lease_expires_at: null })
    .where('id', '=', deliveryId)
    .where('status', '=', 'failed')
    .executeTakeFirst();
  if (Number(moved.numUpdatedRows) === 0) return { kind: 'not-failed', status: 'changed meanwhile' };
  return { kind: 'requeued', webhookId: row.webhook_id, workspaceId: row.workspace_id, tenantId: row.tenant_id, error: row.error };
}
