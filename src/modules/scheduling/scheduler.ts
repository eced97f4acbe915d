/**
 * The scheduler (DESIGN §9): runs search triggers whose schedule ticked. Nothing needs a leader:
 * every process may run one, and a tick is claimed by a compare-and-set of `next_run_at` from
 * the value read to the following tick (claimTick), in the same transaction that plans the tick's
 * runs, so a tick is run once across all processes, and a crash before the commit leaves the
 * tick unclaimed for the next look.
 *
 * After a downtime only the latest missed tick runs (`latestTickAtOrBefore`), and `next_run_at`
 * jumps to the first tick after now. Every time comes from the container's clock.
 */
import { hostname } from 'node:os';
import type { Logger } from '../../lib/logger.js';
import type { Clock } from '../../lib/clock.js';
import { uuidv4 } from '../../lib/ids.js';
import { latestTickAtOrBefore, nextRunAfter } from '../schedules/next-tick.js';
import type { StoredSchedule } from '../triggers/trigger.repository.js';
import { createPlannedRuns, sweepPlannedRuns, DEFAULT_PLAN_LEASE_MS, type RunStarterDeps } from '../events/planned-runs.js';
import { claimTick, findDueSearchTriggers, loadTriggerForEvaluation, type DueTrigger } from './search-trigger.repository.js';
import { planSearchRuns } from './search-runs.js';
import { LoopFailureLog } from '../../lib/loop-failure-log.js';

export interface SchedulerDeps extends RunStarterDeps {
  clock: Clock;
  logger: Logger;
}

export interface SchedulerOptions {
  /** How often to look for due ticks (default 1 s). */
  pollMs?: number;
  /** Lease on planned runs (default 60 s). */
  planLeaseMs?: number;
  /** Due triggers read per look (default 100). */
  batch?: number;
}

export interface TickOutcome {
  triggerId: string;
  tick: string;
  idempotencyKey: string;
  started: number;
  skipped: number;
}

/** The idempotency key every run of one tick carries. */
export const tickKey = (triggerId: string, tick: Date): string => `schedule:${triggerId}:${tick.toISOString()}`;

function parseStored(text: string): StoredSchedule | null {
  try {
    const value = JSON.parse(text) as StoredSchedule;
    return typeof value.interval === 'string' && typeof value.timezone === 'string' && typeof value.anchor === 'string' ? value : null;
  } catch {
    return null;
  }
}

export class Scheduler {
  readonly owner = `${hostname()}:${process.pid}:scheduler:${uuidv4().slice(0, 8)}`;
  private readonly pollMs: number;
  private readonly planLeaseMs: number;
  private readonly batch: number;
  private stopping = false;
  private running: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private readonly loopFailures: LoopFailureLog;

  constructor(
    private readonly deps: SchedulerDeps,
    options: SchedulerOptions = {},
  ) {
    this.loopFailures = new LoopFailureLog(deps.logger, 'scheduler could not run due ticks');
    this.pollMs = options.pollMs ?? 1000;
    this.planLeaseMs = options.planLeaseMs ?? DEFAULT_PLAN_LEASE_MS;
    this.batch = options.batch ?? 100;
  }

  /** Runs every tick due now; returns what each claimed tick started. */
  async runDueTicks(): Promise<TickOutcome[]> {
    const now = this.deps.clock.now();
    const outcomes: TickOutcome[] = [];
    for (;;) {
      const due = await findDueSearchTriggers(this.deps.db, now.toISOString(), this.batch);
      let moved = 0;
      for (const trigger of due) {
        const outcome = await this.runTick(trigger, now);
        if (outcome !== 'unreadable') moved++;
        if (outcome !== 'unreadable' && outcome !== 'taken') outcomes.push(outcome);
      }
      // A full batch may hide more due triggers; the ones handled have moved past `now`.
      if (due.length < this.batch || moved === 0) return outcomes;
    }
  }

  /** `taken`: another scheduler claimed this tick first; `unreadable`: the stored schedule is damaged. */
  private async runTick(due: DueTrigger, now: Date): Promise<TickOutcome | 'taken' | 'unreadable'> {
    const { db, dialect, logger } = this.deps;
    const schedule = parseStored(due.schedule);
    if (!schedule) {
      logger.error({ triggerId: due.id }, 'search trigger has an unreadable schedule; it is skipped');
      return 'unreadable';
    }
    const anchor = new Date(schedule.anchor);
    const nextRunAt = new Date(due.next_run_at);
    const latest = latestTickAtOrBefore(schedule, anchor, now);
    const tick = latest !== null && latest >= nextRunAt ? latest : nextRunAt;
    // null when the series has ended: the trigger stays, with no next run.
    const next = nextRunAfter(schedule, anchor, now);
    // A next run not after now would be due again at once, and its tick run again every poll
    // (a fall-back night once did that: next-tick.ts). Never claimed so: it is logged instead.
    if (next !== null && next.getTime() <= now.getTime()) {
      logger.error({ triggerId: due.id, next: next.toISOString() }, 'search trigger: its next run is not after now; the tick is not run');
      return 'unreadable';
    }
    const idempotencyKey = tickKey(due.id, tick);
    let ranAlready = false;

    const planned = await db.transaction().execute(async (tx) => {
      const claim = await claimTick(tx, due.id, due.next_run_at, next?.toISOString() ?? null, tick.toISOString());
      if (claim === 'taken') return null;
      // A tick at or before the last one run ran already: `next_run_at` was set back to it (a
      // PATCH served by a process whose clock is behind, or just before the tick ran elsewhere).
      // Claimed, so the trigger moves on, but run again never (migration 0018).
      ranAlready = claim === 'ran-already';
      if (ranAlready) return { plannedRunIds: [], matched: 0, skipped: 0 };
      const trigger = await loadTriggerForEvaluation(tx, due.id);
      if (!trigger || !trigger.blueprint || !trigger.query) {
        logger.warn({ triggerId: due.id }, 'search trigger lost its blueprint or saved query; the tick starts nothing');
        return { plannedRunIds: [], matched: 0, skipped: 0 };
      }
      const context = {
        tenantId: trigger.tenant_id,
        workspaceId: trigger.workspace_id,
        requestId: idempotencyKey,
        keyId: null,
        keyName: 'carepath',
        owner: this.owner,
        leaseExpiresAt: new Date(now.getTime() + this.planLeaseMs).toISOString(),
        at: now.toISOString(),
      };
      return planSearchRuns(tx, dialect, { ...trigger, query: trigger.query }, context, {
        idempotencyKey,
        tick: tick.toISOString(),
        origin: { via: 'schedule', tick: tick.toISOString() },
      });
    });
    if (!planned) return 'taken';
    if (ranAlready) {
      logger.warn({ triggerId: due.id, tick: tick.toISOString() }, 'schedule tick ran already (the trigger\'s next run was set back to it); nothing started');
      return { triggerId: due.id, tick: tick.toISOString(), idempotencyKey, started: 0, skipped: 0 };
    }
    const started = await createPlannedRuns(this.deps, this.owner, planned.plannedRunIds, this.planLeaseMs);
    logger.info({ triggerId: due.id, tick: tick.toISOString(), started, skipped: planned.skipped }, 'schedule tick ran');
    return { triggerId: due.id, tick: tick.toISOString(), idempotencyKey, started, skipped: planned.skipped };
  }

  /** Creates runs of planned rows whose holder died. */
  sweep(): Promise<number> {
    return sweepPlannedRuns(this.deps, this.owner, this.planLeaseMs);
  }

  start(): void {
    this.stopping = false;
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.wake?.();
    await this.running;
    this.running = null;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        await this.runDueTicks();
        await this.sweep();
        this.loopFailures.succeeded();
      } catch (error) {
        this.loopFailures.failed(error);
      }
      if (this.stopping) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.pollMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }
}
