/**
 * One guarded write of one run, as an execution hands it to the group commit
 * (step-committer.ts), and how its guard reads: the status the row must be in, the status it
 * moves to, whether it ends the run. Both ways of committing (a transaction of statements, or on
 * PostgreSQL one statement for a plain batch) read a write the same way through `guardOf`.
 */
import type { DbOrTx, RunStepTable } from '../storage/database.js';
import type { RunStatus } from './run-status.js';
import type { Lease } from './sql/lease.js';
import type { RecordKey } from '../modules/records/record-locks.js';

export interface StepFinish {
  at: string;
  outcome: string;
  output: string | null;
  error: string | null;
}

export interface StepWrite {
  lease: Lease;
  at: string;
  /**
   * The run's status as its worker knows it: `scheduled` for the first write after a claim,
   * which also moves the run to `running` (or straight to its end).
   */
  from: 'scheduled' | 'running';
  /** The run's progress after this write (engine_state JSON). */
  state: string;
  /** A step may start only while the run is `running`; recording a call's outcome needs only the lease. */
  requireRunning: boolean;
  /** Ends the run, with its lease. */
  end?: { status: RunStatus; error: { message: string; nodeId: string } | null };
  /** A step row to insert (a step starting, or a local step whole). */
  insertStep?: RunStepTable;
  /** A step row that finishes now (a call's outcome, a wait woken). */
  finishStep?: { stepId: string; finish: StepFinish };
  /** The open attempt of a call that is being made again. */
  interruptStep?: string;
  /** The run ends while other branches still have steps open: close them, drop their event waits. */
  closeOpenSteps?: boolean;
  /** The step's own database writes (tags, event waits). */
  effect?: (tx: DbOrTx, at: string) => Promise<void>;
  /**
   * The patient's (or practitioner's) record `effect` changes, which deliveries change too: on
   * PostgreSQL locked with every such record of the batch before any effect runs, in the order
   * deliveries lock theirs (modules/records/record-locks.ts).
   */
  locksRecord?: RecordKey;
  /** The effect may throw to ask for a new plan: commit this write on its own. */
  alone?: boolean;
}

export interface Guard {
  /** The status after the write: its end, or `running`. */
  to: RunStatus;
  /** 1 when the row must still be in `from` (a step starts, or the run moves on). */
  checkStatus: 0 | 1;
  /** 1 when the write ends the run (and its lease). */
  ends: 0 | 1;
  /** The run's error (JSON) when it ends errored. */
  error: string | null;
}

export function guardOf(write: StepWrite): Guard {
  const to = write.end ? write.end.status : 'running';
  return {
    to,
    checkStatus: write.requireRunning || to !== write.from ? 1 : 0,
    ends: write.end ? 1 : 0,
    error: write.end?.error ? JSON.stringify(write.end.error) : null,
  };
}

/**
 * A write made of rows alone: no effect of its own, no other step rows to close. On PostgreSQL a
 * batch of such writes commits in one statement (step-commit-postgres.ts).
 */
export function isPlainWrite(write: StepWrite): boolean {
  return !write.effect && !write.interruptStep && !(write.end && write.closeOpenSteps) && !write.alone;
}

/**
 * The SET list of the guarded run UPDATE, over a row source `w` of (id, fence, state,
 * from_status, to_status, check_status, ends, error, at): the same on both stores'
 * batch commits (step-committer.ts, step-commit-postgres.ts).
 */
export const GUARDED_RUN_CHANGES = `
      engine_state = w.state,
      automation_status = case when w.to_status <> w.from_status then w.to_status else runs.automation_status end,
      updated_at = case when w.to_status <> w.from_status then w.at else runs.updated_at end,
      error = case when w.ends = 1 then w.error else runs.error end,
      lease_owner = case when w.ends = 1 then null else runs.lease_owner end`;
