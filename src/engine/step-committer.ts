/**
 * Group commit for the guarded writes of a worker's runs. Every execution hands its write (the
 * run's new progress, the step record, the step's effect, maybe the run's end) to `submit`;
 * writes that arrive while a commit is in progress are committed together in the next
 * transaction, with one guarded UPDATE for all their runs, one INSERT for all their step rows
 * and one tag swap per end status.
 *
 * Why: a one-node run took one transaction of seven statements to itself, and the commit (the
 * pages it dirtied: the run row, its indexes, the Pathway tags, the step row) cost more than the
 * work. Sharing the commit among the runs of a batch measured several times more runs per
 * second on both stores (src/engine/README.md, "Decisions").
 *
 * Each run's write stays atomic and guarded: its guard is its own row's condition in the shared
 * UPDATE (lease current, and `running` when a step starts), and its remaining statements are
 * made only when that row passed. A write whose effect may ask for a new plan (the end of an
 * event wait by timeout) is committed alone, so rolling it back never touches another run.
 *
 * A batch of plain writes (rows only: no effect, nothing else to close) is one statement on
 * PostgreSQL, not a transaction of seven (step-commit-postgres.ts), and on SQLite one synchronous
 * transaction of prepared statements (step-commit-sqlite.ts); a batch with any other write takes
 * the Kysely transaction below.
 */
import type { Db, DbOrTx } from '../storage/database.js';
import { postgresPoolOf, sqliteConnectionOf } from '../storage/connect.js';
import type { RunStatus } from './run-status.js';
import { swapStatusTags } from './run-transitions.js';
import { commitPlainWritesOnPostgres } from './step-commit-postgres.js';
import { commitPlainWritesOnSqlite } from './step-commit-sqlite.js';
import { GUARDED_RUN_CHANGES, guardOf, isPlainWrite, type StepWrite } from './step-write.js';
import { interruptWaits } from './sql/interrupt-waits.js';
import { finishStepRow, insertSteps, interruptStepRow } from './sql/step-rows.js';
import { memoText, repeatRows, runSql } from './sql/prepared.js';
import { isConflictError, storeWaitMs } from '../lib/store-errors.js';
import { lockRecordsInOrder } from '../modules/records/record-locks.js';
import { claimAlone, claimedLease, isUnclaimed, markClaimed } from './sql/claim-on-write.js';

export type { StepFinish, StepWrite } from './step-write.js';

interface Pending {
  write: StepWrite;
  resolve: (applied: boolean) => void;
  reject: (error: unknown) => void;
}

export class StepCommitter {
  private queue: Pending[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly db: Db,
    private readonly options: { maxBatch?: number; concurrency?: number } = {},
  ) {}

  /** True when the write was applied; false when its guard failed (paused, ended, lease lost). */
  submit(write: StepWrite): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.queue.push({ write, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= (this.options.concurrency ?? 1) || this.queue.length === 0) return;
    this.scheduled = true;
    // setImmediate lets every execution that reached its write in this turn join the batch.
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.inFlight >= (this.options.concurrency ?? 1) || this.queue.length === 0) return;
    const batch = takeBatch(this.queue, this.options.maxBatch ?? 200);
    this.inFlight++;
    try {
      const writes = batch.map((p) => p.write);
      const applied = await commitBatchGivingWay(this.db, writes);
      batch.forEach((pending) => pending.resolve(applied.has(pending.write.lease.runId)));
    } catch (error) {
      if (batch.length === 1 || (storeWaitMs(error) !== null && !isConflictError(error))) {
        for (const pending of batch) pending.reject(error);
      } else {
        // One write the store refuses (a bug its data brings out) failed every run of the batch,
        // and, let go at the same moment, they met in one batch again at every retry: healthy
        // runs never finished (a verification round). Each is committed alone now, and only the
        // one that fails alone fails. So with a batch PostgreSQL kept choosing to roll back
        // (deadlocks): failed whole, every call's outcome in it was lost and the call made again.
        // A store that did not answer fails them all, as it would.
        for (const pending of batch) {
          await commitBatchGivingWay(this.db, [pending.write]).then(
            (applied) => pending.resolve(applied.has(pending.write.lease.runId)),
            (alone: unknown) => pending.reject(alone),
          );
        }
      }
    } finally {
      this.inFlight--;
      this.schedule();
    }
  }
}

/** Tries of a batch that PostgreSQL rolled back for another transaction's sake. */
const CONFLICT_TRIES = 5;

/**
 * `commitBatch`, tried again when PostgreSQL rolled it back to break a deadlock (with a delivery
 * changing the same records, say): nothing of it was written, and failing the batch would let go
 * of every run in it, so that a call whose answer it carried was made again. After a short,
 * random pause that grows with each try, so that the two transactions do not meet again at once.
 */
async function commitBatchGivingWay(db: Db, writes: StepWrite[]): Promise<Set<string>> {
  for (let tries = 1; ; tries++) {
    try {
      return await commitBatch(db, writes);
    } catch (error) {
      if (tries >= CONFLICT_TRIES || !isConflictError(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * tries));
    }
  }
}

/**
 * The next batch: up to `max` writes, or one write that must be alone; never two writes of one
 * run. A batch's statements guard each run's rows by its run id (the guarded UPDATE answers the
 * runs whose guard passed, and their step rows follow). Two writes of one run can be waiting
 * together when a worker took a run again whose lease ran out under it (a stall longer than the
 * lease): the stale execution's write and the new one's. In one batch the stale write's step
 * rows rode on the new write's guard, and it was told it was applied: a call recorded `ok` twice
 * and the run executed twice (found under load by the crash test of three worker processes).
 * The later write waits for the next batch, where the guard judges it alone.
 */
export function takeBatch<P extends { write: Pick<StepWrite, 'alone' | 'lease'> }>(queue: P[], max: number): P[] {
  if (queue[0].write.alone) return queue.splice(0, 1);
  const runs = new Set<string>();
  let end = 0;
  while (end < queue.length && end < max && !queue[end].write.alone && !runs.has(queue[end].write.lease.runId)) {
    runs.add(queue[end].write.lease.runId);
    end++;
  }
  return queue.splice(0, end);
}

/**
 * Commits writes of several runs together, the cheapest way the store allows: a batch of plain
 * writes on PostgreSQL in one statement, on SQLite synchronously through prepared statements;
 * any other batch in one Kysely transaction. Answers the runs whose guard passed.
 */
export async function commitBatch(db: Db, writes: StepWrite[]): Promise<Set<string>> {
  const applied = await writeBatchTheStoresWay(db, writes);
  // Committed, whichever way: the claims of first writes hold from here on.
  for (const write of writes) if (applied.has(write.lease.runId)) markClaimed(write.lease);
  return applied;
}

/** The batch, written the cheapest way the store allows (above); the leases are not touched. */
function writeBatchTheStoresWay(db: Db, writes: StepWrite[]): Promise<Set<string>> {
  const pool = postgresPoolOf(db);
  // Runs are read unclaimed on SQLite only (sql/claim-on-write.ts); PostgreSQL's workers claim.
  if (pool && writes.some((write) => isUnclaimed(write.lease))) throw new Error('a run read unclaimed reached a PostgreSQL commit');
  if (writes.every(isPlainWrite)) {
    if (pool) return commitPlainWritesOnPostgres(pool, writes);
    const connection = sqliteConnectionOf(db);
    if (connection) return commitPlainWritesOnSqlite(db, connection, writes);
  }
  return db.transaction().execute((tx) => commitWrites(tx, writes, { lockRecords: pool !== undefined, lockRuns: pool !== undefined }));
}

/**
 * Writes of several runs in one transaction; answers the runs whose guard passed. With
 * `lockRecords` (PostgreSQL), the patients' records the effects change are locked first, all
 * together and in the order deliveries lock theirs: effects in batch order locked them in any
 * order, and two batches, or a batch and a delivery, deadlocked. With `lockRuns` (PostgreSQL),
 * the runs' rows are locked first, in id order, as an event's wake locks the runs waiting for it
 * (event-waits.ts): in the order of the batch, a batch and a wake each held one of a patient's
 * waiting runs and waited for the other (step-commit-postgres.ts says the same of the one
 * statement).
 */
export async function commitWrites(tx: DbOrTx, allWrites: StepWrite[], options: { lockRecords?: boolean; lockRuns?: boolean } = {}): Promise<Set<string>> {
  const writes = await claimFirstWrites(tx, allWrites);
  if (writes.length === 0) return new Set();
  if (options.lockRuns) await lockRunsInOrder(tx, writes);
  const applied = await guardedUpdate(tx, writes);
  const passed = writes.filter((write) => applied.has(write.lease.runId));
  const records = passed.flatMap((write) => (write.locksRecord ? [write.locksRecord] : []));
  if (options.lockRecords && records.length > 0) await lockRecordsInOrder(tx, records);
  for (const write of passed) {
    if (write.interruptStep) await interruptStepRow(tx, write.interruptStep, write.at);
    await write.effect?.(tx, write.at);
    if (write.finishStep) await finishStepRow(tx, write.finishStep.stepId, write.finishStep.finish);
  }
  await insertSteps(tx, passed.flatMap((write) => (write.insertStep ? [write.insertStep] : [])));
  for (const write of passed) {
    if (write.end && write.closeOpenSteps) {
      await interruptWaits(tx, write.lease.runId, write.at, `the run ended (${write.end.status}) before this step finished`);
    }
  }
  // The Pathway status tags follow, one swap per kind of move.
  const moves = new Map<string, { from: RunStatus; to: RunStatus; runIds: string[] }>();
  for (const write of passed) {
    const to = statusAfter(write);
    if (to === write.from) continue;
    const key = `${write.from}>${to}`;
    const move = moves.get(key) ?? { from: write.from, to, runIds: [] };
    move.runIds.push(write.lease.runId);
    moves.set(key, move);
  }
  for (const move of moves.values()) await swapStatusTags(tx, move.runIds, move.from, move.to, passed[0].at);
  return applied;
}

/**
 * The first writes of runs read unclaimed (SQLite, sql/claim-on-write.ts) claim their runs in
 * this transaction, each in a statement of its own; then they are guarded like any other, at the
 * claim's fence. A run that changed since it was read drops out (its write is not applied). The
 * workers' leases learn of the claims once the transaction committed (`commitBatch`).
 */
async function claimFirstWrites(tx: DbOrTx, writes: StepWrite[]): Promise<StepWrite[]> {
  if (!writes.some((write) => isUnclaimed(write.lease))) return writes;
  const claimed: StepWrite[] = [];
  for (const write of writes) {
    if (!isUnclaimed(write.lease)) claimed.push(write);
    else if (await claimAlone(tx, write.lease, write.at)) claimed.push({ ...write, lease: claimedLease(write.lease) });
  }
  return claimed;
}

/** PostgreSQL: the rows of the batch's runs this worker holds, locked in id order until commit. */
async function lockRunsInOrder(tx: DbOrTx, writes: StepWrite[]): Promise<void> {
  const ids = writes.map((write) => write.lease.runId).sort();
  await tx.selectFrom('runs').select('id').where('id', 'in', ids).where('lease_owner', '=', writes[0].lease.owner).orderBy('id').forUpdate().execute();
}

function statusAfter(write: StepWrite): RunStatus {
  return guardOf(write).to;
}

/**
 * One UPDATE guards and writes every run of the batch, joined to a VALUES list of the writes:
 * each row must still be leased at its own fence, and be in the status its worker knows where
 * a step starts or the run moves on (recording a call's outcome needs the lease alone). A row
 * that moves gets its status and time; a row that ends also its error and the end of its lease,
 * exactly as setRunStatus writes them. Answers the runs whose guard passed.
 *
 * One statement per batch instead of one per run: on PostgreSQL one round trip instead of one
 * per run; on SQLite the same time inside SQLite (51 ms against 52 ms for 3,000 one-node runs)
 * and none of the per-run query building. A CASE chain per column was slower (127 ms). Its text
 * is made once per batch size (sql/prepared.ts).
 */
async function guardedUpdate(tx: DbOrTx, writes: StepWrite[]): Promise<Set<string>> {
  const params: unknown[] = [];
  for (const write of writes) {
    const { to, checkStatus, ends, error } = guardOf(write);
    params.push(write.lease.runId, write.lease.fence, write.state, write.from, to, checkStatus, ends, error, write.at);
  }
  params.push(writes[0].lease.owner);
  const text = memoText(guardedUpdateTexts, writes.length, () => guardedUpdateText(writes.length));
  const result = await runSql<{ id: string }>(tx, text, params);
  return new Set(result.rows.map((row) => row.id));
}

const guardedUpdateTexts = new Map<number, string>();

function guardedUpdateText(rows: number): string {
  const row = '(?, cast(? as integer), ?, ?, ?, cast(? as integer), cast(? as integer), ?, ?)';
  return `with w (id, fence, state, from_status, to_status, check_status, ends, error, at) as (values ${repeatRows(row, rows)})
    update runs set ${GUARDED_RUN_CHANGES}
    from w
    where runs.id = w.id
      and runs.lease_owner = ?
      and runs.lease_fence = w.fence
      and (w.check_status = 0 or runs.automation_status = w.from_status)
    returning runs.id`;
}
