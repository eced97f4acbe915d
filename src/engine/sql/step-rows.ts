/**
 * The step timeline (`run_steps`): one row per execution of an automation, written before and
 * after it runs. Writes here are always made inside a transaction whose first statement was a
 * fenced write on the run, so a worker without its lease never gets this far.
 */
import type { DbOrTx, RunStepTable } from '../../storage/database.js';
import { memoText, placeholders, repeatRows, runSql } from './prepared.js';

/** Step rows of several runs, one statement (its text made once per row count: prepared.ts). */
export async function insertSteps(db: DbOrTx, rows: RunStepTable[]): Promise<void> {
  if (rows.length === 0) return;
  const params: unknown[] = [];
  for (const row of rows) {
    params.push(row.id, row.run_id, row.node_id, row.automation_id, row.automation_type, row.attempt, row.started_at);
    params.push(row.finished_at, row.outcome, row.output, row.error);
  }
  await runSql(db, memoText(insertTexts, rows.length, () => insertText(rows.length)), params);
}

const insertTexts = new Map<number, string>();

function insertText(rows: number): string {
  return (
    'insert into run_steps (id, run_id, node_id, automation_id, automation_type, attempt, started_at, finished_at, outcome, output, error) ' +
    `values ${repeatRows(placeholders(11), rows)}`
  );
}

export async function finishStepRow(
  db: DbOrTx,
  stepId: string,
  finish: { at: string; outcome: string; output: string | null; error: string | null },
): Promise<void> {
  await db
    .updateTable('run_steps')
    .set({ finished_at: finish.at, outcome: finish.outcome, output: finish.output, error: finish.error })
    .where('id', '=', stepId)
    .execute();
}

/**
 * An attempt whose outcome was never recorded: its worker was lost, or could not write it, or
 * let the run go (paused mid-call); the next attempt makes the call again.
 */
export async function interruptStepRow(db: DbOrTx, stepId: string, at: string): Promise<void> {
  await db
    .updateTable('run_steps')
    .set({ finished_at: at, outcome: 'interrupted', error: 'the outcome of this attempt was not recorded (its worker was lost or could not write it, or the run was paused before a retry); the next attempt makes the call again' })
    .where('id', '=', stepId)
    .where('finished_at', 'is', null)
    .execute();
}

/**
 * A run's timeline, in the order the steps started (ids are time-ordered UUID v7, made when the
 * step starts; unique, so the order has no ties), one page at a time: the steps after `afterId`
 * (a keyset on the `run_steps_run (run_id, id)` index), at most `limit` of them. A step recorded
 * while a client pages gets a later id than those already handed out, so it comes on a later
 * page: none is skipped or repeated. Without a limit, every step after `afterId`.
 */
export async function listStepRows(db: DbOrTx, runId: string, page: { afterId?: string; limit?: number } = {}): Promise<RunStepTable[]> {
  let select = db.selectFrom('run_steps').selectAll().where('run_id', '=', runId);
  if (page.afterId !== undefined) select = select.where('id', '>', page.afterId);
  select = select.orderBy('id');
  if (page.limit !== undefined) select = select.limit(page.limit);
  return select.execute();
}
