/**
 * The delivery processor: claims stored deliveries and applies them, then creates the runs they
 * planned. Any number of processors may run, in any number of processes (claims use SKIP LOCKED
 * on PostgreSQL); one that dies loses nothing, because
 * - a claimed delivery carries a lease, and once the lease runs out another processor claims it;
 * - applying is one transaction, so a retry starts from scratch, never from half;
 * - runs planned by a processed delivery are created by whoever holds their lease (planned-runs.ts),
 *   and its wakes of waiting runs are handed over by whoever holds the delivery (event-wake.ts).
 *
 * A delivery whose processing throws is retried with backoff, and marked `failed` after
 * `maxAttempts` claims (which also ends a delivery that keeps killing its process). Its error
 * names the kind of failure only: database messages can quote the data.
 */
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Db } from '../../storage/database.js';
import type { Dialect } from '../../storage/connect.js';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import type { WorkSignals } from '../../lib/work-signals.js';
import type { RunCreator } from '../../engine/run-creator.js';
import { uuidv4 } from '../../lib/ids.js';
import type { FhirValidator } from '../../ingestion/fhir-validate.js';
import { createPlannedRuns, sweepPlannedRuns, DEFAULT_PLAN_LEASE_MS, type RunStarterDeps } from '../events/planned-runs.js';
import { claimDeliveries, markFailed } from './delivery.repository.js';
import { applyDelivery, UnreadableDeliveryError, type ClaimedDelivery } from './delivery-apply.js';
import { deliverWakes, sweepPendingWakes, type PendingWake } from './event-wake.js';

export interface DeliveryProcessorDeps {
  db: Db;
  dialect: Dialect;
  clock: Clock;
  logger: Logger;
  signals: WorkSignals;
  runCreator: RunCreator;
  validator: FhirValidator;
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
  /** Claim loops in this process (default 1 on SQLite, which has one writer; 2 on PostgreSQL). */
  concurrency?: number;
  /** Claims before a delivery is marked failed (default 5). */
  maxAttempts?: number;
}

/** Seconds to wait before retrying after the n-th failed attempt: 2, 4, 8, … capped at a minute. */
const retryDelayMs = (attempts: number): number => Math.min(60_000, 1000 * 2 ** attempts);

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
  private readonly batch: number;
  private readonly concurrency: number;
  private readonly maxAttempts: number;
  private stopping = false;
  private loops: Promise<void>[] = [];
  private wakeSleepers = new Set<() => void>();

  constructor(
    private readonly deps: DeliveryProcessorDeps,
    options: DeliveryProcessorOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? 60_000;
    this.planLeaseMs = options.planLeaseMs ?? DEFAULT_PLAN_LEASE_MS;
    this.pollMs = options.pollMs ?? 1000;
    this.batch = options.batch ?? 4;
    this.concurrency = options.concurrency ?? (deps.dialect === 'postgres' ? 2 : 1);
    this.maxAttempts = options.maxAttempts ?? 5;
  }

  private get runStarter(): RunStarterDeps {
    const { db, dialect, runCreator, clock } = this.deps;
    return { db, dialect, runCreator, now: () => clock.now() };
  }

  /** Claims up to one batch and processes it; returns how many deliveries it claimed. */
  async processBatch(): Promise<number> {
    const now = this.deps.clock.now();
    const claimed = await claimDeliveries(
      this.deps.db,
      this.deps.dialect,
      this.owner,
      now.toISOString(),
      new Date(now.getTime() + this.leaseMs).toISOString(),
      this.batch,
    );
    for (const delivery of claimed) await this.process(delivery);
    return claimed.length;
  }

  /** Finishes what dead processes left: runs of planned rows, wakes of processed deliveries. */
  async sweep(): Promise<number> {
    const created = await sweepPlannedRuns(this.runStarter, this.owner, this.planLeaseMs);
    const woken = await sweepPendingWakes(this.deps.db, this.deps.dialect, this.owner, this.deps.clock.now(), this.leaseMs);
    return created + woken;
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

  private async process(delivery: ClaimedDelivery): Promise<void> {
    const { db, clock, logger } = this.deps;
    const log = { deliveryId: delivery.id, webhookId: delivery.webhook_id };
    if (delivery.attempts > this.maxAttempts) {
      await markFailed(db, delivery.id, this.owner, clock.now().toISOString(), `processing did not finish after ${this.maxAttempts} attempts`);
      logger.error({ ...log, attempts: delivery.attempts }, 'delivery failed: too many attempts');
      return;
    }
    let planned: string[];
    let wakes: PendingWake[];
    try {
      const body = delivery.body;
      if (body === null) throw new UnreadableDeliveryError('the stored delivery body is missing');
      const result = await applyDelivery(this.deps, delivery, body, this.owner, clock.now(), this.leaseMs, this.planLeaseMs);
      if (result.kind === 'lease-lost') {
        logger.warn(log, 'delivery was taken over by another processor');
        return;
      }
      planned = result.plannedRunIds;
      wakes = result.wakes;
      logger.info(
        { ...log, accepted: delivery.accepted, skipped: result.outcome.problemCount, runsStarted: planned.length },
        'delivery processed',
      );
    } catch (error) {
      await this.failed(delivery, error);
      return;
    }
    try {
      await createPlannedRuns(this.runStarter, this.owner, planned, this.planLeaseMs);
      if (wakes.length > 0) {
        await deliverWakes(db, { id: delivery.id, workspaceId: delivery.workspace_id }, this.owner, wakes, clock.now().toISOString());
      }
    } catch (error) {
      // Planned rows and pending wakes stay; a sweep finishes them once their lease runs out.
      logger.error({ ...log, err: { type: (error as Error).name } }, 'could not start the runs or wakes of a delivery yet');
    }
  }

  private async failed(delivery: ClaimedDelivery, error: unknown): Promise<void> {
    const { db, clock, logger } = this.deps;
    const message = describeFailure(error);
    logger.error({ deliveryId: delivery.id, attempts: delivery.attempts, err: { type: (error as Error)?.name } }, message);
    const now = clock.now();
    const final = error instanceof UnreadableDeliveryError || delivery.attempts >= this.maxAttempts;
    if (final) {
      await markFailed(db, delivery.id, this.owner, now.toISOString(), message);
      return;
    }
    // Keep it `processing` under a short lease: the claim query takes it again when that runs out.
    await db
      .updateTable('deliveries')
      .set({ lease_expires_at: new Date(now.getTime() + retryDelayMs(delivery.attempts)).toISOString(), error: message })
      .where('id', '=', delivery.id)
      .where('lease_owner', '=', this.owner)
      .where('status', '=', 'processing')
      .execute();
  }

  /** Runs the claim loops until `stop`. */
  start(): void {
    this.stopping = false;
    for (let i = 0; i < this.concurrency; i++) this.loops.push(this.loop());
  }

  async stop(): Promise<void> {
    this.stopping = true;
    for (const wake of this.wakeSleepers) wake();
    await Promise.all(this.loops);
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
      } catch (error) {
        this.deps.logger.error({ err: { type: (error as Error)?.name } }, 'delivery processor could not claim work');
      }
      if (claimed === 0 && !this.stopping) await this.sleep();
    }
  }

  /** Waits for `pollMs`, or less when a delivery is stored in this process. */
  private sleep(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        off();
        this.wakeSleepers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, this.pollMs);
      const off = this.deps.signals.on('deliveries', done);
      this.wakeSleepers.add(done);
    });
  }
}
