/**
 * A worker: claims due runs in small batches, executes each (run-execution.ts), keeps their
 * leases alive with heartbeats, and lets them go when it stops.
 *
 * It polls (every `pollMs`, with ±50% jitter so workers spread out) and is woken early by
 * `signals.on('runs')` (a run created or resumed in this process) or by `wake()` (another
 * process's notification). After a full claim it claims again at once; with fewer than half a
 * batch of free slots it waits until an execution ends and leaves that much room.
 *
 * Tests and benchmarks drive it without the loop: `runOnce()` claims one batch and executes it
 * to the end, `drain()` repeats until nothing is due.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { ExpressionCache } from '../lib/fhirpath.js';
import { addMs } from '../lib/clock.js';
import { isTransientStoreError, loggableError, storeWaitMs } from '../lib/store-errors.js';
import { LoopFailureLog } from '../lib/loop-failure-log.js';
import { GraphCache } from './graph-cache.js';
import type { EngineServices } from './engine-services.js';
import { loadClaimedRuns, type LoadedRun } from './run-loader.js';
import { RunExecution } from './run-execution.js';
import { setRunStatus } from './run-transitions.js';
import { claimRuns, type ClaimedRunRow } from './sql/claim-runs.js';
import { readDueRuns, takeOver } from './sql/read-due-runs.js';
import { claimAlone, isUnclaimed, markClaimed } from './sql/claim-on-write.js';
import { extendLeases } from './sql/extend-leases.js';
import type { Lease } from './sql/lease.js';
import { clearFailures, releaseRun } from './sql/release-run.js';
import { StepCommitter } from './step-committer.js';

export interface WorkerOptions {
  /** Names this worker in leases; unique per process start by default. */
  workerId?: string;
  /** How long a claim holds a run without a heartbeat (default 30 s). */
  leaseMs?: number;
  pollMs?: number;
  /** Most runs claimed in one statement. */
  batchSize?: number;
  /** Most runs executed at once (runs in an http call or a short step each hold one). */
  concurrency?: number;
  /** Claims in flight at once (default: 2 on PostgreSQL, where a claim waits on the network; 1 on SQLite). */
  claimConcurrency?: number;
}

interface HeldRun {
  lease: Lease;
  lost: boolean;
  /**
   * When the lease runs out by this worker's clock (ms): the time it was claimed or last
   * extended, taken before the statement, plus the lease. For a run read unclaimed (SQLite), from
   * the read: its first write starts the lease later, so this is the earlier end.
   */
  leaseEndsAt: number;
  /** Unexpected failures in a row before this claim (`runs.failures`). */
  failures: number;
  /** SQLite: the run's rowid, by which reads skip it while its first write has not claimed it. */
  seq?: number;
}

/** A run this worker has taken: read (SQLite, claimed by its first write) or claimed. */
interface TakenRun {
  row: ClaimedRunRow;
  lease: Lease;
  seq?: number;
}

/**
 * A run whose execution failed in a way no one expected (a bug its data brings out, a statement
 * the store refuses) is retried after this, doubling with each failure in a row up to
 * RETRY_AFTER_FAILURE_MAX_MS: tried every 5 minutes until a fix is deployed, not every 5 seconds
 * for ever. It is never given up: what failed was the service, not the pathway
 * (src/engine/README.md, "Guarantees"). A store that did not answer or had no room is waited
 * for without counting (`storeWaitMs`): when it is back, every run goes on within seconds.
 */
const RETRY_AFTER_FAILURE_MS = 5_000;
const RETRY_AFTER_FAILURE_MAX_MS = 5 * 60_000;

/**
 * What follows a failed execution at `at` of a run that had failed `failuresBefore` times in a
 * row: the failures in a row now, and when it is tried again.
 */
export function afterFailure(at: string, failuresBefore: number, error: unknown): { failures: number; retryAt: string } {
  const storeWait = storeWaitMs(error);
  if (storeWait !== null) return { failures: failuresBefore, retryAt: addMs(at, storeWait) };
  const failures = failuresBefore + 1;
  return { failures, retryAt: addMs(at, Math.min(RETRY_AFTER_FAILURE_MS * 2 ** (failures - 1), RETRY_AFTER_FAILURE_MAX_MS)) };
}

export class RunWorker {
  readonly id: string;
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private readonly batchSize: number;
  private readonly concurrency: number;
  private readonly expressions = new ExpressionCache(2000);
  private readonly graphs: GraphCache;
  private readonly committer: StepCommitter;
  private readonly held = new Map<string, HeldRun>();
  private readonly executing = new Set<Promise<void>>();
  private heartbeat: NodeJS.Timeout | null = null;
  private readonly claimConcurrency: number;
  private loop: Promise<void> | null = null;
  private stopping = false;
  /** Slots promised to the claims in flight (each reserves as many as it may claim). */
  private reserved = 0;
  /** A claim loop found no room and waits for an execution to end. */
  private roomWanted = false;
  private wakePending = false;
  private readonly wakeNaps = new Set<() => void>();
  private unsubscribe: (() => void) | null = null;
  private readonly claimFailures: LoopFailureLog;
  /**
   * SQLite: no reads before this time (ms), after a run read unclaimed failed and its failure
   * could not be written either: the store refuses writes (full, or locked by another process),
   * and the run, still due, would be read and fail again at once.
   */
  private readsPausedUntil = 0;

  constructor(
    private readonly services: EngineServices,
    options: WorkerOptions = {},
  ) {
    this.id = options.workerId ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.leaseMs = options.leaseMs ?? 30_000;
    this.pollMs = options.pollMs ?? 250;
    this.concurrency = options.concurrency ?? 64;
    this.batchSize = Math.min(options.batchSize ?? 20, this.concurrency);
    this.claimConcurrency = options.claimConcurrency ?? (services.dialect === 'postgres' ? 2 : 1);
    this.graphs = new GraphCache(services.db);
    this.claimFailures = new LoopFailureLog(services.logger, 'claiming runs failed', { workerId: this.id });
    // SQLite has one writer; on PostgreSQL a second commit may be prepared while one flushes.
    this.committer = new StepCommitter(services.db, { concurrency: services.dialect === 'postgres' ? 2 : 1 });
  }

  /** Starts the claim loop in the background. */
  start(): void {
    if (this.loop) return;
    this.unsubscribe = this.services.signals.on('runs', () => this.wake());
    this.loop = Promise.all(Array.from({ length: this.claimConcurrency }, () => this.claimLoop())).then(() => undefined);
  }

  /** Work may be waiting: claim now instead of at the next poll. */
  wake(): void {
    this.wakePending = true;
    for (const wakeNap of [...this.wakeNaps]) wakeNap();
  }

  /** Stops claiming, lets every held run reach a step boundary and releases it. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.unsubscribe?.();
    this.wake();
    await this.loop;
    await Promise.allSettled([...this.executing]);
    this.stopHeartbeat();
  }

  /** Claims one batch and executes it to the end (sleep, pause, end). Answers how many were claimed. */
  async runOnce(limit = this.batchSize): Promise<number> {
    const started = await this.claimAndStart(limit);
    await Promise.allSettled(started);
    return started.length;
  }

  /** Runs batches until nothing is due. Answers how many runs were claimed (a run woken again counts again). */
  async drain(maxBatches = 10_000): Promise<number> {
    let total = 0;
    for (let i = 0; i < maxBatches; i++) {
      const claimed = await this.runOnce();
      if (claimed === 0) return total;
      total += claimed;
    }
    return total;
  }

  /**
   * One claim loop. On PostgreSQL two run side by side: a claim there waits on the network, and
   * while one waits the other can take the runs that arrived meanwhile (SKIP LOCKED keeps them
   * apart). On SQLite the one connection does the claims one after the other anyway.
   */
  private async claimLoop(): Promise<void> {
    while (!this.stopping) {
      const paused = this.readsPausedUntil - Date.now();
      if (paused > 0) {
        await this.nap(paused);
        continue;
      }
      let claimed = 0;
      const limit = this.claimSize();
      if (limit > 0) {
        this.reserved += limit;
        try {
          claimed = (await this.claimAndStart(limit)).length;
          this.claimFailures.succeeded();
        } catch (error) {
          this.claimFailures.failed(error);
        } finally {
          this.reserved -= limit;
          // A claim that took fewer runs than it reserved leaves room for the other loop.
          this.wakeIfRoom();
        }
      }
      const room = this.claimSize() > 0;
      // A full claim means more may be due: claim again at once while there is room.
      if (limit > 0 && claimed === limit && room) continue;
      // Without room, the next execution that leaves room wakes the loop.
      if (!room) this.roomWanted = true;
      await this.nap(this.jitteredPoll());
    }
  }

  /**
   * How many runs to claim now: what the free slots take, up to a batch, but never fewer than
   * half a batch (a claim is one statement whatever its size: claiming each slot as it frees
   * wasted most of the claim's cost). Slots promised to claims in flight count as taken.
   */
  private claimSize(): number {
    const free = this.concurrency - this.executing.size - this.reserved;
    if (free === this.concurrency) return this.batchSize;
    return free >= Math.ceil(this.batchSize / 2) ? Math.min(this.batchSize, free) : 0;
  }

  /** Room again after the slots were full: a loop waiting for it may claim. */
  private wakeIfRoom(): void {
    if (this.roomWanted && this.claimSize() > 0) {
      this.roomWanted = false;
      this.wake();
    }
  }

  private nap(ms: number): Promise<void> {
    if (this.wakePending || this.stopping) {
      this.wakePending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeNaps.delete(done);
        this.wakePending = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeNaps.add(done);
    });
  }

  private jitteredPoll(): number {
    return Math.round(this.pollMs * (0.5 + Math.random()));
  }

  /**
   * One claim: a batch is taken (PostgreSQL: leased in one statement; SQLite: read, each run
   * claimed by its first write), then each run starts executing. A scheduled run turns
   * `running` with its first recorded step (the same guarded write), not in a transaction of
   * its own: fire-to-running is one commit shorter.
   */
  private async claimAndStart(limit: number): Promise<Promise<void>[]> {
    if (limit <= 0 || this.stopping) return [];
    const now = this.services.clock.now().toISOString();
    const leaseUntil = addMs(now, this.leaseMs);
    const taken: TakenRun[] =
      this.services.dialect === 'sqlite'
        ? await this.readDue(now, leaseUntil, limit)
        : (await claimRuns(this.services.db, { owner: this.id, now, leaseUntil, limit })).map((row) => ({
            row,
            lease: { runId: row.id, owner: this.id, fence: row.lease_fence },
          }));
    if (taken.length === 0) return [];
    // This claim's own holds, carried to each execution: by the time a run is loaded, another
    // claim loop of this worker may have taken it again (its lease ran out while the load
    // stalled), and the map then holds that newer claim's hold, not this one's.
    const holds = new Map<string, HeldRun>();
    for (const { row, lease, seq } of taken) {
      // Taken again by this very worker: its lease ran out under an execution still going (a
      // stall longer than the lease). That one's lease is lost, at the old fence: it writes
      // nothing more, and the new execution goes on from what was recorded.
      const stale = this.held.get(row.id);
      if (stale) stale.lost = true;
      const held: HeldRun = { lease, lost: false, leaseEndsAt: Date.parse(leaseUntil), failures: row.failures, seq };
      this.held.set(row.id, held);
      holds.set(row.id, held);
    }
    this.ensureHeartbeat();
    const rows = taken.map((run) => run.row);
    let loaded: LoadedRun[];
    try {
      loaded = await loadClaimedRuns(this.services.db, this.graphs, rows, now);
    } catch (error) {
      await Promise.allSettled(rows.map((row) => this.letGoAfterFailure(row.id, error, holds.get(row.id))));
      // Not held any more, whether the release went through or not: when it failed too (the
      // connection was dropped), the heartbeat went on extending these leases for as long as
      // the process lived, and the runs never ran (an on-call review). Now the lease runs out
      // and any worker takes them again. A newer claim's hold of the same run stays.
      for (const row of rows) if (this.held.get(row.id) === holds.get(row.id)) this.held.delete(row.id);
      if (this.held.size === 0) this.stopHeartbeat();
      throw error;
    }
    return loaded.map((run) => this.track(this.execute(run, holds.get(run.row.id)!)));
  }

  /**
   * SQLite: due runs read without claiming them (sql/claim-on-write.ts): the first write of each
   * claims it. Skipped: runs this worker read whose first write is not committed yet. A run
   * whose lease ran out (its worker died or stalled) is claimed at once, raising the fence, as
   * its stale holder could otherwise still write.
   */
  private async readDue(now: string, leaseUntil: string, limit: number): Promise<TakenRun[]> {
    const skip: number[] = [];
    for (const held of this.held.values()) if (held.seq !== undefined && isUnclaimed(held.lease)) skip.push(held.seq);
    const rows = await readDueRuns(this.services.db, { now, limit, skip });
    const taken: TakenRun[] = [];
    for (const { lease_owner: owner, seq, ...row } of rows) {
      if (this.held.has(row.id)) continue;
      if (owner === null) {
        const status = row.automation_status === 'scheduled' ? 'scheduled' : 'running';
        taken.push({ row, seq, lease: { runId: row.id, owner: this.id, fence: row.lease_fence, unclaimed: { status, leaseMs: this.leaseMs } } });
        continue;
      }
      const fence = await takeOver(this.services.db, { runId: row.id, readFence: row.lease_fence, owner: this.id, now, leaseUntil });
      if (fence !== null) taken.push({ row: { ...row, lease_fence: fence }, lease: { runId: row.id, owner: this.id, fence } });
    }
    return taken;
  }

  /**
   * A run read unclaimed claims itself in a statement of its own before a write that is not a
   * step's (letting it go, putting it to sleep, failing it). False when it changed since it was
   * read: it is not this worker's to write.
   */
  private async ensureClaimed(lease: Lease): Promise<boolean> {
    if (!isUnclaimed(lease)) return true;
    if (!(await claimAlone(this.services.db, lease, this.services.clock.now().toISOString()))) return false;
    markClaimed(lease);
    return true;
  }

  private track(execution: Promise<void>): Promise<void> {
    this.executing.add(execution);
    void execution.finally(() => {
      this.executing.delete(execution);
      this.wakeIfRoom();
    });
    return execution;
  }

  private async execute(loaded: LoadedRun, held: HeldRun): Promise<void> {
    try {
      if (!loaded.graph || !loaded.state) return await this.failUnreadable(loaded.row, held.lease);
      const execution = new RunExecution(
        this.services,
        this.expressions,
        loaded.graph,
        loaded.run,
        loaded.state,
        loaded.row.wake_seq,
        {
          lease: held.lease,
          committer: this.committer,
          claimedAs: loaded.row.automation_status === 'scheduled' ? 'scheduled' : 'running',
          lost: () => held.lost,
          holdsLease: () => !held.lost && this.services.clock.now().getTime() < held.leaseEndsAt,
          stopping: () => this.stopping,
          claim: () => this.ensureClaimed(held.lease),
        },
      );
      await execution.execute();
      // Not when it never wrote (its first write found the run changed): it was never ours.
      if (held.failures > 0 && !isUnclaimed(held.lease)) await clearFailures(this.services.db, held.lease);
    } catch (error) {
      await this.letGoAfterFailure(loaded.row.id, error, held);
    } finally {
      // Only this execution's own hold: a newer one of the same run (taken again) keeps its own.
      if (this.held.get(loaded.row.id) === held) this.held.delete(loaded.row.id);
      if (this.held.size === 0) this.stopHeartbeat();
    }
  }

  /** The frozen graph cannot be read (missing or no longer valid): the run errors. */
  private async failUnreadable(row: ClaimedRunRow, lease: Lease): Promise<void> {
    if (!(await this.ensureClaimed(lease))) return;
    const at = this.services.clock.now().toISOString();
    const moved = await this.services.db.transaction().execute((tx) =>
      setRunStatus(tx, {
        runId: row.id,
        from: row.automation_status === 'scheduled' ? 'scheduled' : 'running',
        to: 'errored',
        at,
        error: { message: `the blueprint version this run was copied from (${row.source_id} v${row.source_version}) cannot be read`, nodeId: '' },
        endLease: lease,
      }),
    );
    // Paused or canceled meanwhile: let go, so a resumed run is not held until the lease ends.
    if (!moved) await releaseRun(this.services.db, lease, { availableAt: at });
    else {
      this.services.logger.warn(
        { runId: row.id, workspaceId: row.workspace_id, triggerId: row.trigger_id, blueprintId: row.source_id, version: row.source_version, workerId: this.id },
        'run errored: its blueprint version cannot be read',
      );
    }
  }

  /**
   * An unexpected failure (a store error, a bug): log it, count it on the run, and let the run be
   * retried later, the later the more failures in a row.
   */
  /** `held`: the hold of the claim that failed (not looked up by run id: a newer claim may hold the run). */
  private async letGoAfterFailure(runId: string, error: unknown, held: HeldRun | undefined): Promise<void> {
    const before = held?.failures ?? 0;
    const { failures, retryAt } = afterFailure(this.services.clock.now().toISOString(), before, error);
    // A dropped connection or a failover is expected now and then: a warning without frames, as
    // the API logs it (138 error lines with stacks for one burst of terminated backends).
    const transient = isTransientStoreError(error);
    this.services.logger[transient ? 'warn' : 'error'](
      { err: loggableError(error, { frames: !transient }), runId, workerId: this.id, failures, retryAt },
      'executing a run failed; it will be retried',
    );
    if (!held || held.lost) return;
    let stillDue = false;
    await this.ensureClaimed(held.lease)
      .then((ours) => ours && releaseRun(this.services.db, held.lease, { availableAt: retryAt, failed: failures > before }))
      .catch(() => {
        stillDue = isUnclaimed(held.lease);
      });
    // Read unclaimed, and the store refused even its claim: still due, the run would be read and
    // fail again at once. The worker reads nothing for a while instead (the store refuses writes).
    if (stillDue) this.readsPausedUntil = Date.now() + RETRY_AFTER_FAILURE_MS;
  }

  private ensureHeartbeat(): void {
    if (this.heartbeat) return;
    this.heartbeat = setInterval(() => void this.beat(), Math.max(50, Math.floor(this.leaseMs / 3)));
  }

  private stopHeartbeat(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }

  /** Extends every held lease; a run whose lease was taken is marked lost and writes nothing more. */
  private async beat(): Promise<void> {
    // A run read unclaimed has no lease in the store yet: its first write takes it.
    const holding = [...this.held.values()].filter((held) => !held.lost && !isUnclaimed(held.lease));
    if (holding.length === 0) return;
    try {
      const until = addMs(this.services.clock.now().toISOString(), this.leaseMs);
      const extended = await extendLeases(this.services.db, holding.map((held) => held.lease), until);
      for (const held of holding) {
        if (extended.has(held.lease.runId)) held.leaseEndsAt = Math.max(held.leaseEndsAt, Date.parse(until));
        else if (this.held.get(held.lease.runId) === held) held.lost = true;
      }
    } catch (error) {
      this.services.logger.warn({ err: loggableError(error), workerId: this.id }, 'heartbeat failed');
    }
  }
}
