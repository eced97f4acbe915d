/**
 * Writes one batch of new runs in one transaction with Kysely, one multi-row INSERT per table
 * (the SQLite path; PostgreSQL uses batch-writer-postgres.ts, one statement for the batch).
 */
import type { Transaction } from 'kysely';
import type { Database } from '../../storage/database.js';
import { auditRow } from '../../modules/audit/audit.repository.js';
import type { CreateOutcome, PreparedRun } from '../run-creator.js';
import { claimantsOf, readStandingClaims } from './claims.js';

export async function writeBatchWithKysely(tx: Transaction<Database>, runs: PreparedRun[]): Promise<CreateOutcome[]> {
  const outcomes: (CreateOutcome | null)[] = runs.map(() => null);
  const claimants = claimantsOf(runs);
  const won = new Set<number>();
  if (claimants.length > 0) {
    const inserted = await tx
      .insertInto('idempotency_keys')
      .values(
        claimants.map((i) => ({
          workspace_id: runs[i].ctx.workspaceId,
          key: runs[i].claim!.key,
          fingerprint: runs[i].claim!.fingerprint,
          trigger_id: runs[i].triggerId,
          run_id: runs[i].runId,
          created_at: runs[i].at,
        })),
      )
      .onConflict((oc) => oc.columns(['workspace_id', 'key']).doNothing())
      .returning(['workspace_id', 'key'])
      .execute();
    const insertedKeys = new Set(inserted.map((row) => `${row.workspace_id}\u0000${row.key}`));
    for (const i of claimants) {
      if (insertedKeys.has(`${runs[i].ctx.workspaceId}\u0000${runs[i].claim!.key}`)) won.add(i);
    }
  }

  const writers = runs.map((run, i) => ({ run, i })).filter(({ run, i }) => !run.claim || won.has(i));
  if (writers.length > 0) {
    await tx
      .insertInto('runs')
      .values(
        writers.map(({ run }) => ({
          id: run.runId,
          workspace_id: run.ctx.workspaceId,
          trigger_id: run.triggerId,
          source_id: run.blueprint.id,
          source_version: run.blueprint.version,
          name: run.blueprint.name,
          idempotency_key: run.idempotencyKey,
          automation_status: run.status,
          error: null,
          payload: run.payloadJson,
          subject_record_id: run.subjectRecordId,
          created_at: run.at,
          updated_at: run.at,
          // Due from its creation: queued behind timers that fell due earlier, not ahead of them.
          available_at: run.at,
        })),
      )
      .execute();
    await tx
      .insertInto('records')
      .values(
        writers.map(({ run }) => ({
          id: run.runId,
          workspace_id: run.ctx.workspaceId,
          resource_type: 'Pathway' as const,
          ext_id: run.runId,
          name: run.blueprint.name,
          created_at: run.at,
          updated_at: run.at,
        })),
      )
      .execute();
    await tx
      .insertInto('record_tags')
      .values(writers.map(({ run }) => ({ record_id: run.runId, workspace_id: run.ctx.workspaceId, tag: run.status })))
      .execute();
    await tx
      .insertInto('audit_events')
      .values(
        writers.map(({ run }) =>
          auditRow(run.ctx, run.at, {
            action: 'run.create',
            resourceType: 'run',
            resourceId: run.runId,
            details: { triggerId: run.triggerId, sourceId: run.blueprint.id, status: run.status, ...run.origin },
          }),
        ),
      )
      .execute();
    for (const { run, i } of writers) outcomes[i] = { kind: 'created', runId: run.runId };
  }

  return readStandingClaims(tx, runs, outcomes);
}
