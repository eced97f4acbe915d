/**
 * Turning planned runs into runs. Every run still goes through the run creator (one code path
 * writes a run, its instance, its Pathway record and its `run.create` audit event); a planned
 * row only makes the decision durable in its cause's transaction.
 *
 * Why not create the runs inside that transaction: the run creator group-commits in its own
 * transactions (on SQLite one connection, which the cause's transaction holds), so the runs
 * would either wait for a lock that is never released or be written by a second code path.
 * Planning first costs one extra insert and delete per run, and gives crash safety for free:
 * - the cause's transaction commits its runs as planned rows, or nothing;
 * - a row is created by the holder of its lease; if that process dies, the lease runs out and a
 *   sweep anywhere takes the row over;
 * - before creating, the holder checks which run ids exist already (a process that died between
 *   creating and deleting), so a run is never made twice: its id was fixed when it was planned.
 */
import type { Db } from '../../storage/database.js';
import type { Logger } from '../../lib/logger.js';
import type { Dialect } from '../../storage/connect.js';
import type { RunCreator, PreparedRun } from '../../engine/run-creator.js';
import type { RequestContext } from '../../auth/context.js';
import { parseJson } from '../../lib/json.js';
import { ID_CHUNK, chunks } from './sql-chunks.js';
import {
  deletePlannedRuns,
  existingRunIds,
  liveTriggerIds,
  renewOwnPlannedRuns,
  takeOverExpiredPlannedRuns,
  type PlannedRunRow,
} from './planned-runs.repository.js';

export interface RunStarterDeps {
  db: Db;
  dialect: Dialect;
  runCreator: RunCreator;
  now: () => Date;
  /** Says how many planned runs were dropped because their trigger went away (none: not said). */
  logger?: Pick<Logger, 'info'>;
}

/** How long a process may hold planned rows before another one may take them over. */
export const DEFAULT_PLAN_LEASE_MS = 60_000;

function preparedRun(row: PlannedRunRow): PreparedRun {
  const ctx: RequestContext = {
    tenantId: row.tenant_id,
    workspaceId: row.workspace_id,
    keyId: row.key_id ?? '',
    keyName: row.key_name,
    scopes: [],
    environment: 'staging',
    requestId: row.request_id,
  };
  return {
    ctx,
    runId: row.id,
    triggerId: row.trigger_id,
    blueprint: { id: row.source_id, name: row.blueprint_name, version: row.source_version },
    status: row.status,
    payloadJson: row.payload,
    subjectRecordId: row.subject_record_id,
    idempotencyKey: row.idempotency_key,
    claim: null,
    origin: parseJson<Record<string, unknown>>(row.origin, {}),
    at: row.planned_at,
  };
}

/**
 * Creates the runs of rows this process holds; rows whose run exists are only cleaned up, and
 * rows whose trigger was deleted or switched off since they were planned are dropped: a tick of
 * 20,000 records went on making runs for 14 s after its trigger's DELETE had answered 204 (a
 * review). Each chunk looks again, so at most the chunk in hand is made after the change.
 */
async function createHeld(deps: RunStarterDeps, rows: PlannedRunRow[]): Promise<number> {
  if (rows.length === 0) return 0;
  const existing = await existingRunIds(deps.db, rows.map((row) => row.id));
  const live = await liveTriggerIds(deps.db, rows.map((row) => row.trigger_id));
  const dropped = rows.filter((row) => !existing.has(row.id) && !live.has(row.trigger_id));
  await deletePlannedRuns(deps.db, dropped.map((row) => row.id));
  logDropped(deps, dropped);
  const missing = rows.filter((row) => !existing.has(row.id) && live.has(row.trigger_id));
  const outcomes = await Promise.allSettled(missing.map((row) => deps.runCreator.create(preparedRun(row))));
  const created = new Set(missing.filter((_, i) => outcomes[i].status === 'fulfilled').map((row) => row.id));
  const done = rows.filter((row) => existing.has(row.id) || created.has(row.id));
  // Only rows whose run now exists are removed; a failed one keeps its lease and is retried by
  // a sweep once the lease runs out.
  await deletePlannedRuns(deps.db, done.map((row) => row.id));
  const failure = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
  if (failure) throw failure.reason;
  return created.size;
}

/** One line per trigger whose planned runs were dropped: runs a caller may look for and not find. */
function logDropped(deps: RunStarterDeps, dropped: readonly PlannedRunRow[]): void {
  if (!deps.logger || dropped.length === 0) return;
  const byTrigger = new Map<string, { workspaceId: string; runs: number }>();
  for (const row of dropped) {
    const seen = byTrigger.get(row.trigger_id) ?? { workspaceId: row.workspace_id, runs: 0 };
    seen.runs++;
    byTrigger.set(row.trigger_id, seen);
  }
  for (const [triggerId, { workspaceId, runs }] of byTrigger) {
    deps.logger.info({ triggerId, workspaceId, runs }, 'planned runs dropped: their trigger was deleted or switched off after they were planned');
  }
}

/**
 * Creates the runs just planned by `owner` (the cause's transaction has committed). Returns how
 * many runs it created. Works in chunks, renewing the lease on each before creating it.
 */
export async function createPlannedRuns(
  deps: RunStarterDeps,
  owner: string,
  ids: readonly string[],
  leaseMs: number = DEFAULT_PLAN_LEASE_MS,
): Promise<number> {
  let created = 0;
  for (const chunk of chunks(ids, ID_CHUNK)) {
    const until = new Date(deps.now().getTime() + leaseMs).toISOString();
    const held = await renewOwnPlannedRuns(deps.db, chunk, owner, until);
    created += await createHeld(deps, held);
  }
  return created;
}

/**
 * Takes over planned rows whose lease ran out (their process died) and creates their runs.
 * Safe to call from any number of processes at once. Returns how many runs it created.
 */
export async function sweepPlannedRuns(
  deps: RunStarterDeps,
  owner: string,
  leaseMs: number = DEFAULT_PLAN_LEASE_MS,
  limit: number = ID_CHUNK,
): Promise<number> {
  const now = deps.now();
  const taken = await takeOverExpiredPlannedRuns(
    deps.db,
    deps.dialect,
    owner,
    now.toISOString(),
    new Date(now.getTime() + leaseMs).toISOString(),
    limit,
  );
  return createHeld(deps, taken);
}
