/**
 * The delivery processor: claims stored deliveries and applies them, then creates the runs they
 * planned. Any number of processors may run, in any number of processes (claims use SKIP LOCKED
 * on PostgreSQL); one that dies loses nothing, because
 * - a claimed delivery carries a lease, and once the lease runs out another processor claims it;
 * - applying is one transaction, so a retry starts from scratch, never from half (a delivery
 *   applied in parts goes on after the last part committed: delivery-parts.ts);
 * - runs planned by a processed delivery are created by whoever holds their lease (planned-runs.ts),
 *   and its wakes of waiting runs are handed over by whoever holds the delivery (event-wake.ts).
 *
 * A delivery whose processing throws is retried with backoff, and marked `failed` after
 * `maxAttempts` claims (which also ends a delivery that keeps killing its process). Its error
 * names the kind of failure only: database messages can quote the data.
 */
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { WorkerBasics } from '../../container.js';
import { uuidv4 } from '../../lib/ids.js';
import { ApiError } from '../../lib/errors.js';
import type { DeliveryDigest } from '../../ingestion/delivery-digest.js';
import { createPlannedRuns, sweepPlannedRuns, DEFAULT_PLAN_LEASE_MS, type RunStarterDeps } from '../events/planned-runs.js';
import { claimDeliveries, extendDeliveryLeases, markFailed, readDeliveryBodies, releaseDeliveries } from './delivery.repository.js';
import {
  applyDeliveries,
  applyDelivery,
  UnreadableDeliveryError,
  type ApplyResult,
  type ClaimedDelivery,
  type PreparedDelivery,
} from './delivery-apply.js';
import { parsedHandoffFor, type IntakeClaimant, type ParsedHandoff } from './parsed-handoff.js';
import { deliverWakes, handOver, sweepPendingWakes } from './event-wake.js';
import { appliedItemsOf, deleteProgress, handedOverWakes, leftProgress, PART_ITEMS } from './delivery-parts.js';
import type { DeliveryReader } from './delivery-reader.js';
import { isStoreFullError, loggableError, storeWaitMs, isConflictError } from '../../lib/store-errors.js';
import { LoopFailureLog } from '../../lib/loop-failure-log.js';

export interface DeliveryProcessorDeps extends WorkerBasics {
  /** Reads stored bodies that were not handed over in memory (delivery-reader.ts). */
  reader: DeliveryReader;
}

export interface DeliveryProcessorOptions {
  /** How long a claim holds before another processor may take the delivery (default 60 s). */
  leaseMs?: number;
  /** Lease on planned runs (default 60 s). */
  planLeaseMs?: number;
  /** Idle wait between looks at the store when no signal arrives (default 1 s). */
  pollMs?: number;
  /** Deliveries claimed at once (default 4). */
  batch?: number;
  /**
   * How long to let deliveries gather after a wake-up by one stored in this process, before
   * claiming (default 5 ms): the ones that arrive meanwhile are claimed and committed together
   * (about a fifth less work per delivery on SQLite). Only the processing waits; the 202 does not.
   */
  gatherMs?: number;
  /** Claim loops in this process (default 1 on SQLite, which has one writer; 2 on PostgreSQL). */
  concurrency?: number;
  /** Claims before a delivery is marked failed (default 5). */
  maxAttempts?: number;
  /**
   * Items (resources and records) applied in one transaction at most (default `PART_ITEMS`,
   * 1,000): deliveries claimed together share a commit (applyDeliveries) up to this size, and a
   * larger delivery is applied in parts of this size, so the store is not held for long while
   * other requests wait for it (on SQLite, one connection).
   */
  transactionItems?: number;
}

/** Consecutive groups of deliveries, each within `maxItems` items (a larger delivery is a group alone). */
function groupsOf(prepared: PreparedDelivery[], maxItems: number): PreparedDelivery[][] {
  const groups: PreparedDelivery[][] = [];
  let items = 0;
  for (const delivery of prepared) {
    const size = delivery.digest.items.length;
    const last = groups.at(-1);
    if (last && items + size <= maxItems) {
      last.push(delivery);
      items += size;
    } else {
      groups.push([delivery]);
      items = size;
    }
  }
  return groups;
}

/** Seconds to wait before retrying after the n-th failed attempt: 2, 4, 8, … capped at a minute. */
const retryDelayMs = (attempts: number): number => Math.min(60_000, 1000 * 2 ** attempts);

/**
 * A failure of the store rather than of the delivery: a database that did not answer, or one
 * with no room to write. The delivery waits for the store as long as that takes, and the try
 * does not count against its attempts: five tries in a minute would otherwise mark `failed`,
 * for good, data the sender was told (202) it had handed over, because a disk filled up at
 * night. How long it waits, and what the delivery shows meanwhile.
 */
function storeProblemOf(error: unknown): { waitMs: number; message: string } | null {
  const waitMs = storeWaitMs(error);
  if (waitMs === null) return null;
  const why = isStoreFullError(error)
    ? 'it has no room to write'
    : isConflictError(error)
      ? 'it stopped this transaction for another one that needed the same rows (a deadlock or a serialization conflict); it is tried again'
      : 'it did not answer';
  return { waitMs, message: `waiting for the database: ${why}` };
}

function describeFailure(error: unknown): string {
  if (error instanceof UnreadableDeliveryError) return error.message;
  const name = error instanceof Error ? error.name : 'Error';
  const code = (error as { code?: unknown } | null)?.code;
  return `processing failed (${name}${typeof code === 'string' && /^[A-Z0-9_]{1,40}$/i.test(code) ? ` ${code}` : ''})`;
}

export class DeliveryProcessor {
  /** Names this processor in leases: host, process and a random part (two in one process differ). */
  readonly owner = `${hostname()}:${process.pid}:${uuidv4().slice(0, 8)}`;
  private readonly leaseMs: number;
  private readonly planLeaseMs: number;
  private readonly pollMs: number;
  private readonly gatherMs: number;
  private readonly batch: number;
  private readonly concurrency: number;
  private readonly maxAttempts: number;
  private readonly transactionItems: number;
  private stopping = false;
  private loops: Promise<void>[] = [];
  /** Parsed bodies from this process's intake; used while this processor runs (`start`). */
  private readonly handoff: ParsedHandoff;
  private wakeSleepers = new Set<() => void>();
  /** This processor as the one the intake of this process claims deliveries for. */
  private readonly claimant: IntakeClaimant;
  private readonly loopFailures: LoopFailureLog;

  constructor(
    private readonly deps: DeliveryProcessorDeps,
    options: DeliveryProcessorOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? 60_000;
    this.planLeaseMs = options.planLeaseMs ?? DEFAULT_PLAN_LEASE_MS;
    this.pollMs = options.pollMs ?? 1000;
    this.gatherMs = options.gatherMs ?? 5;
    this.batch = options.batch ?? 4;
    this.concurrency = options.concurrency ?? (deps.dialect === 'postgres' ? 2 : 1);
    this.maxAttempts = options.maxAttempts ?? 5;
    this.transactionItems = options.transactionItems ?? PART_ITEMS;
    this.handoff = parsedHandoffFor(deps.db);
    this.claimant = { owner: this.owner, leaseMs: this.leaseMs };
    this.loopFailures = new LoopFailureLog(deps.logger, 'delivery processor could not claim work');
  }

  private get runStarter(): RunStarterDeps {
    const { db, dialect, runCreator, clock, logger } = this.deps;
    return { db, dialect, runCreator, now: () => clock.now(), logger };
  }

  /** Claims up to one batch and processes it; returns how many deliveries it claimed. */
  async processBatch(): Promise<number> {
    const now = this.deps.clock.now();
    // Deliveries stored in this process come claimed for this processor already (parsed-handoff.ts);
    // the store is asked for the rest of a batch: received elsewhere, or leases that ran out.
    const claimed = this.handoff.takeClaimed(this.owner, this.batch);
    const fromIntake = claimed.length;
    if (claimed.length < this.batch) {
      // With parsed bodies waiting in memory, the claim leaves the (large) bodies in the store and
      // only the ones not handed over are read.
      const withBodies = this.handoff.size === 0;
      const fromStore = await claimDeliveries(
        this.deps.db,
        this.deps.dialect,
        this.owner,
        now.toISOString(),
        new Date(now.getTime() + this.leaseMs).toISOString(),
        this.batch - claimed.length,
        withBodies,
      );
      // A delivery claimed at intake whose lease ran out before this processor took it (a
      // backlog) comes from the store again: it is applied once. Twice, the second copy found
      // its digest taken and its body unread, and its rejection, unheard while the first was
      // applied, ended the process.
      const taken = new Set(claimed.map((delivery) => delivery.id));
      claimed.push(...fromStore.filter((delivery) => !taken.has(delivery.id)));
    }
    if (claimed.length === 0) return 0;
    // Held while they are worked on: a delivery that takes longer than its lease is not claimed
    // again meanwhile (by another process, or by this one's other loop) and counted as an attempt.
    const stopHolding = this.holdWhileProcessing(claimed.map((delivery) => delivery.id));
    try {
      await this.processClaimed(claimed, fromIntake);
    } finally {
      stopHolding();
    }
    return claimed.length;
  }

  /**
   * Extends the leases of deliveries being processed, every third of the lease, until stopped.
   * Only this owner's and only while `processing`: one taken over or finished is left alone.
   */
  private holdWhileProcessing(ids: string[]): () => void {
    const timer = setInterval(() => {
      const until = new Date(this.deps.clock.now().getTime() + this.leaseMs).toISOString();
      extendDeliveryLeases(this.deps.db, ids, this.owner, until).catch((error: unknown) => {
        this.deps.logger.warn({ deliveries: ids.length, err: loggableError(error) }, 'could not extend the leases of deliveries being processed');
      });
    }, Math.max(10, Math.floor(this.leaseMs / 3)));
    timer.unref();
    return () => clearInterval(timer);
  }

  private async processClaimed(claimed: ClaimedDelivery[], fromIntake: number): Promise<void> {
    const unread = claimed.filter((d) => d.body === null && !this.handoff.has(d.id)).map((d) => d.id);
    if (unread.length > 0) {
      const bodies = await readDeliveryBodies(this.deps.db, unread);
      for (const delivery of claimed) if (delivery.body === null) delivery.body = bodies.get(delivery.id) ?? null;
    }
    // Ids in order (the order of applying), wherever each was claimed.
    if (fromIntake > 0 && claimed.length > fromIntake) claimed.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    // Every body not handed over goes to the reader at once (its thread works while this one
    // waits). Each digest is heard at once: `prepare` awaits them one by one, and a rejection
    // left unheard meanwhile would end the process.
    const digests = claimed.map((delivery) => {
      const digest = this.digestOf(delivery);
      digest.catch(() => {});
      return digest;
    });
    const prepared: PreparedDelivery[] = [];
    for (const [i, delivery] of claimed.entries()) {
      const ready = await this.prepare(delivery, digests[i]);
      if (ready) prepared.push(ready);
    }
    for (const group of groupsOf(prepared, this.transactionItems)) await this.applyGroup(group);
  }

  /**
   * Finishes what dead processes left: runs of planned rows, wakes of processed deliveries, and
   * the progress rows of deliveries an earlier version finished (delivery-parts.ts).
   */
  async sweep(): Promise<number> {
    const created = await sweepPlannedRuns(this.runStarter, this.owner, this.planLeaseMs);
    const woken = await sweepPendingWakes(this.deps.db, this.deps.dialect, this.owner, this.deps.clock.now(), this.leaseMs);
    return created + woken + (await this.sweepLeftProgress());
  }

  private async sweepLeftProgress(): Promise<number> {
    const left = await leftProgress(this.deps.db, 20);
    let woken = 0;
    for (const { deliveryId, workspaceId, wakes } of left) {
      woken += await handOver(this.deps.db, workspaceId, wakes, this.deps.clock.now().toISOString());
      await deleteProgress(this.deps.db, deliveryId);
      this.deps.logger.info({ deliveryId, wakes: wakes.length }, 'handed over the wakes of a delivery an earlier version finished, and removed its progress');
    }
    return left.length + woken;
  }

  /** Processes until nothing is waiting (tests, benchmarks, shutdown of a one-shot tool). */
  async drain(): Promise<number> {
    let total = 0;
    for (;;) {
      const claimed = await this.processBatch();
      total += claimed;
      if (claimed === 0 && (await this.sweep()) === 0) return total;
    }
  }

  /** The digest of a claimed delivery: handed over by the intake, or read from its stored body. */
  private async digestOf(delivery: ClaimedDelivery): Promise<DeliveryDigest> {
    const handedOver = this.handoff.take(delivery.id);
    if (handedOver) return handedOver;
    // Claimed without its body because its digest was in memory, and the digest was taken
    // meanwhile (this processor's other loop holds the same delivery): read the body now.
    const body = delivery.body ?? (await readDeliveryBodies(this.deps.db, [delivery.id])).get(delivery.id) ?? null;
    if (body === null) throw new UnreadableDeliveryError('the stored delivery body is missing');
    return this.deps.reader.read(body, { stored: true }).digest();
  }

  /** A claimed delivery with its digest (the CPU work), before any transaction; undefined when it failed. */
  private async prepare(delivery: ClaimedDelivery, digest: Promise<DeliveryDigest>): Promise<PreparedDelivery | undefined> {
    const { db, clock, logger } = this.deps;
    // Handled here whatever happens below: a delivery failed for its attempts never awaits it.
    digest.catch(() => {});
    if (delivery.attempts > this.maxAttempts) {
      const message = `processing did not finish after ${this.maxAttempts} attempts${await this.partsApplied(delivery, true)}`;
      await markFailed(db, delivery.id, this.owner, clock.now().toISOString(), message);
      logger.error({ deliveryId: delivery.id, webhookId: delivery.webhook_id, attempts: delivery.attempts }, 'delivery failed: too many attempts');
      return undefined;
    }
    try {
      return { delivery, digest: await digest };
    } catch (error) {
      // A stored body passed the shape check when it was received; only a damaged row is refused now.
      await this.failed(delivery, error instanceof ApiError ? new UnreadableDeliveryError('the stored delivery body is no longer an accepted shape') : error);
      return undefined;
    }
  }

  /** Applies a group in one transaction; if that fails, each alone, so only a bad one fails. */
  private async applyGroup(group: PreparedDelivery[]): Promise<void> {
    if (group.length === 1 && group[0].digest.items.length > this.transactionItems) {
      await this.applyInParts({ ...group[0], partItems: this.transactionItems });
      return;
    }
    if (group.length > 1) {
      let results: ApplyResult[] | undefined;
      try {
        results = await applyDeliveries(this.deps, group, this.owner, this.deps.clock.now(), this.leaseMs, this.planLeaseMs);
      } catch (error) {
        this.deps.logger.warn({ deliveries: group.length, err: loggableError(error) }, 'a group of deliveries failed; applying them one by one');
      }
      if (results) {
        for (const [i, result] of results.entries()) await this.finish(group[i].delivery, result);
        return;
      }
    }
    for (const prepared of group) await this.applyAlone(prepared);
  }

  /** Applies one delivery (or its next part) in its own transaction and finishes it; undefined when it failed. */
  private async applyAlone(prepared: PreparedDelivery): Promise<ApplyResult | undefined> {
    let result: ApplyResult;
    try {
      result = await applyDelivery(this.deps, prepared, this.owner, this.deps.clock.now(), this.leaseMs, this.planLeaseMs);
    } catch (error) {
      await this.failed(prepared.delivery, error);
      return undefined;
    }
    await this.finish(prepared.delivery, result);
    return result;
  }

  /**
   * Applies a large delivery a part at a time (delivery-parts.ts), each part in its own
   * transaction, and creates the runs each part planned before the next: between parts the
   * requests waiting for the store (on SQLite, for its one connection) go first. A failed part
   * leaves the parts before it committed; the retry goes on after them.
   */
  private async applyInParts(prepared: PreparedDelivery): Promise<void> {
    for (;;) {
      const result = await this.applyAlone(prepared);
      if (result?.kind !== 'part-applied') return;
      if (this.stopping) {
        // Handed back: the next processor goes on after this part at once, not after the lease.
        await releaseDeliveries(this.deps.db, [prepared.delivery.id], this.owner).catch((error: unknown) => {
          // Its lease runs out instead; nothing is lost.
          this.deps.logger.warn({ deliveryId: prepared.delivery.id, err: loggableError(error) }, 'could not hand back a delivery applied in part');
        });
        return;
      }
      // Lets the requests queued while the part was applied in before the next one.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /**
   * After the commit: the runs the delivery planned are created and its wakes handed over. After
   * a part of a delivery applied in parts, the runs that part planned.
   */
  private async finish(delivery: ClaimedDelivery, result: ApplyResult): Promise<void> {
    const { db, clock, logger } = this.deps;
    const log = { deliveryId: delivery.id, webhookId: delivery.webhook_id };
    if (result.kind === 'lease-lost') {
      logger.warn(log, 'delivery was taken over by another processor');
      return;
    }
    const planned = result.plannedRunIds;
    const wakes = result.wakes;
    for (const [triggerId, events] of result.conditionFailures) {
      // The kind of failure only: an evaluation error may quote the resource.
      logger.warn(
        { ...log, triggerId, events },
        "an event trigger's condition (when) could not be evaluated on this delivery's resources, so it started no run for them: an error, not false (a path giving several items where one was wanted, a type that does not compare); fix the condition",
      );
    }
    if (result.kind === 'processed') {
      logger.info({ ...log, accepted: delivery.accepted, skipped: result.outcome.problemCount, runsStarted: result.outcome.runsStarted }, 'delivery processed');
    }
    try {
      await createPlannedRuns(this.runStarter, this.owner, planned, this.planLeaseMs);
      if (result.kind === 'part-applied') {
        // Kept in the progress row until handed over: the next part carries them should this fail.
        if (wakes.length > 0) {
          await handOver(db, delivery.workspace_id, wakes, clock.now().toISOString());
          await handedOverWakes(db, delivery.id, result.appliedItems);
        }
      } else if (wakes.length > 0) {
        await deliverWakes(db, { id: delivery.id, workspaceId: delivery.workspace_id }, this.owner, wakes, clock.now().toISOString());
      }
    } catch (error) {
      // Planned rows and pending wakes stay; a sweep finishes them once their lease runs out.
      logger.error({ ...log, err: loggableError(error) }, 'could not start the runs or wakes of a delivery yet');
    }
  }

  private async failed(delivery: ClaimedDelivery, error: unknown): Promise<void> {
    const { db, clock, logger } = this.deps;
    const storeProblem = storeProblemOf(error);
    const final = !storeProblem && (error instanceof UnreadableDeliveryError || delivery.attempts >= this.maxAttempts);
    const message = (storeProblem?.message ?? describeFailure(error)) + (await this.partsApplied(delivery, final));
    // A deadlock or serialization conflict is the store's ordinary way of settling two
    // transactions that met; the delivery is tried again: a warning, not an error.
    const log = { deliveryId: delivery.id, attempts: delivery.attempts, err: loggableError(error) };
    if (isConflictError(error)) logger.warn(log, message);
    else logger.error(log, message);
    const now = clock.now();
    if (final) {
      await markFailed(db, delivery.id, this.owner, now.toISOString(), message);
      return;
    }
    // Keep it `processing` under a short lease: the claim query takes it again when that runs out.
    const waitMs = storeProblem?.waitMs ?? retryDelayMs(delivery.attempts);
    await db
      .updateTable('deliveries')
      .set((eb) => ({
        lease_expires_at: new Date(now.getTime() + waitMs).toISOString(),
        error: message,
        // The claim counted this try; a try the store failed is given back.
        ...(storeProblem ? { attempts: eb('attempts', '-', 1) } : {}),
      }))
      .where('id', '=', delivery.id)
      .where('lease_owner', '=', this.owner)
      .where('status', '=', 'processing')
      .execute();
  }

  /** For a failure's message: how much of a delivery applied in parts is committed (empty for none). */
  private async partsApplied(delivery: ClaimedDelivery, final: boolean): Promise<string> {
    if (delivery.accepted <= this.transactionItems) return '';
    const applied = await appliedItemsOf(this.deps.db, delivery.id).catch(() => 0);
    if (applied === 0) return '';
    return `; the first ${applied} of its items are applied${final ? '' : ', and the next try goes on after them'}`;
  }

  /** Runs the claim loops until `stop`. */
  start(): void {
    this.stopping = false;
    this.handoff.attach(this.claimant);
    for (let i = 0; i < this.concurrency; i++) this.loops.push(this.loop());
  }

  async stop(): Promise<void> {
    this.stopping = true;
    for (const wake of this.wakeSleepers) wake();
    await Promise.all(this.loops);
    if (this.loops.length > 0) {
      // Deliveries the intake claimed for this processor that it never started go back to
      // `received`, so the next processor takes them at once instead of after the lease.
      const unstarted = this.handoff.claimedFor(this.owner);
      this.handoff.detach(this.claimant);
      try {
        await releaseDeliveries(this.deps.db, unstarted, this.owner);
      } catch (error) {
        // Their leases run out instead; nothing is lost.
        this.deps.logger.warn({ deliveries: unstarted.length, err: loggableError(error) }, 'could not hand back unstarted deliveries');
      }
    }
    this.loops = [];
  }

  private async loop(): Promise<void> {
    // Sweeps look for what dead processes left behind: once per poll interval is plenty, and
    // not once per delivery (each wake-up by a stored delivery would otherwise pay two UPDATEs).
    let lastSweep = 0;
    while (!this.stopping) {
      let claimed = 0;
      try {
        claimed = await this.processBatch();
        if (claimed === 0 && performance.now() - lastSweep >= this.pollMs) {
          lastSweep = performance.now();
          await this.sweep();
        }
        this.loopFailures.succeeded();
      } catch (error) {
        this.loopFailures.failed(error);
      }
      if (claimed === 0 && !this.stopping && (await this.sleep()) === 'signal' && this.gatherMs > 0) {
        await new Promise((resolve) => setTimeout(resolve, this.gatherMs));
      }
    }
  }

  /** Waits for `pollMs`, or less when a delivery is stored in this process; says what ended the wait. */
  private sleep(): Promise<'signal' | 'timeout' | 'stop'> {
    return new Promise((resolve) => {
      const done = (reason: 'signal' | 'timeout' | 'stop') => {
        clearTimeout(timer);
        off();
        this.wakeSleepers.delete(stop);
        resolve(reason);
      };
      const stop = () => done('stop');
      const timer = setTimeout(() => done('timeout'), this.pollMs);
      const off = this.deps.signals.on('deliveries', () => done('signal'));
      this.wakeSleepers.add(stop);
    });
  }
}
