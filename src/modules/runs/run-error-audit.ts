/**
 * A run's `error.message` can carry health data: a `fail` automation's message is the
 * blueprint's text with its `{{ }}` placeholders filled from the run ("HbA1c 11.2 for
 * Patient/…"), and an `http` failure names the URL it called, path included. Whoever is shown
 * such a message is recorded, one `run.error.read` event per errored run answered (with its
 * patient record), before the answer goes out, as reads of the step timeline are. Runs without
 * an error carry ids, times and statuses only: polling them stays unaudited.
 */
import type { RequestContext } from '../../auth/context.js';
import type { DbOrTx } from '../../storage/database.js';
import { recordAudit } from '../audit/audit.repository.js';
import type { RunView } from './run.view.js';

export async function auditErrorsShown(db: DbOrTx, ctx: RequestContext, at: string, runs: readonly RunView[]): Promise<void> {
  const errored = runs.filter((run) => run.error !== null).map((run) => run.runId);
  if (errored.length === 0) return;
  const subjects = await db
    .selectFrom('runs')
    .select(['id', 'subject_record_id'])
    .where('workspace_id', '=', ctx.workspaceId)
    .where('id', 'in', errored)
    .execute();
  const subjectOf = new Map(subjects.map((row) => [row.id, row.subject_record_id]));
  await recordAudit(
    db,
    ctx,
    at,
    errored.map((runId) => ({ action: 'run.error.read', resourceType: 'run', resourceId: runId, details: { subjectRecordId: subjectOf.get(runId) ?? null } })),
  );
}
