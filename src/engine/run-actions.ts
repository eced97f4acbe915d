import type { Db } from '../storage/database.js';
import type { RequestContext } from '../auth/context.js';
import { ApiError, notFound } from '../lib/errors.js';
import { isConflictError } from '../lib/store-errors.js';
import { recordAudit } from '../modules/audit/audit.repository.js';
import { findRun } from '../modules/runs/run.repository.js';
import type { RunView } from '../modules/runs/run.view.js';
import { isTerminal, type RunStatus } from './run-status.js';
import { setRunStatus } from './run-transitions.js';
import { interruptWaits } from './sql/interrupt-waits.js';
import { holding } from '../storage/row-lock.js';

/**
 * What the API may do to a run (DESIGN §5). Each action reads the run, guards its state, writes
 * the new status and its audit event in one transaction. Repeating a pause on a paused run or a
 * cancel on a canceled one answers the run unchanged, and audits nothing (nothing changed).
 */
export type RunAction = 'start' | 'pause' | 'resume' | 'cancel';

type Decision = { to: RunStatus } | { unchanged: true } | { refuse: ApiError };

export function decideRunAction(action: RunAction, status: RunStatus): Decision {
  switch (action) {
    case 'start':
      return status === 'queued'
        ? { to: 'scheduled' }
        : { refuse: new ApiError('run_not_queued', `cannot start a run that is ${status}; only queued runs start`) };
    case 'pause':
      if (status === 'paused') return { unchanged: true };
      if (isTerminal(status)) return { refuse: new ApiError('run_terminal', `cannot pause a run that is ${status}`) };
      return { to: 'paused' };
    case 'resume':
      return status === 'paused'
        ? { to: 'running' }
        : { refuse: new ApiError('run_not_paused', `cannot resume a run that is ${status}; only paused runs resume`) };
    case 'cancel':
      if (status === 'canceled') return { unchanged: true };
      if (isTerminal(status)) return { refuse: new ApiError('run_terminal', `cannot cancel a run that is ${status}`) };
      return { to: 'canceled' };
  }
}

export interface RunActionResult {
  run: RunView;
  changed: boolean;
}

/**
 * `now` is read once the run's row is held (PostgreSQL: locked; SQLite: the transaction holds
 * the write lock), and is always after the run's last change: taken before, as the request
 * came in, a cancel that waited for a resume's commit was stamped before it, so the audit trail
 * listed the cancel before the resume that made it possible and `updatedAt` went back in time
 * (a storm review: 86 of 2,015 runs).
 */
export async function applyRunAction(
  db: Db,
  ctx: RequestContext,
  runId: string,
  action: RunAction,
  now: () => Date,
): Promise<RunActionResult> {
  // A worker may move the run between our read and our write; the guarded write then fails and
  // we decide again on the fresh status. A handful of rounds always settles it.
  // A deadlock with another transaction (40P01) rolled ours back whole: deciding again is safe.
  for (let attempt = 0; attempt < 5; attempt++) {
    const outcome = await db.transaction().execute(async (tx) => {
      const [held] = await holding(tx, tx.selectFrom('runs').select(['id', 'subject_record_id']).where('id', '=', runId)).execute();
      const run = await findRun(tx, ctx.workspaceId, runId);
      if (!run) throw notFound('run');
      const decision = decideRunAction(action, run.automationStatus as RunStatus);
      if ('refuse' in decision) throw decision.refuse;
      if ('unchanged' in decision) return { run, changed: false };
      const at = after(now(), run.updatedAt);
      const moved = await setRunStatus(tx, { runId, from: run.automationStatus as RunStatus, to: decision.to, at });
      if (!moved) return null;
      // A cancel interrupts any wait; a pause leaves waits and timers to resume (timers.ts).
      if (decision.to === 'canceled') await interruptWaits(tx, runId, at, 'the run was canceled');
      await recordAudit(tx, ctx, at, [
        {
          action: `run.${action}`,
          resourceType: 'run',
          resourceId: runId,
          // The patient record the run is about, as in the run's other events (found by `recordId`).
          details: { from: run.automationStatus, to: decision.to, subjectRecordId: held?.subject_record_id ?? null },
        },
      ]);
      return { run: { ...run, automationStatus: decision.to, updatedAt: at }, changed: true };
    }).catch((error: unknown) => {
      if (isConflictError(error) && attempt < 4) return null;
      throw error;
    });
    if (outcome) return outcome;
  }
  throw new ApiError('internal', 'the run kept changing; try again');
}

/** `now`, or a millisecond after `last` when the clock has not passed it (another process's clock, the same millisecond). */
function after(now: Date, last: string): string {
  const floor = Date.parse(last) + 1;
  return new Date(Math.max(now.getTime(), floor)).toISOString();
}
