/**
 * Writes one batch of new runs on PostgreSQL in ONE statement: the batch travels as arrays
 * (`unnest`), and data-modifying CTEs take the idempotency claims, then insert the winners'
 * runs, Pathway records, status tags and audit events, with the events' rows in the audit index
 * by record (the run's Pathway record and its subject, as `recordIdsOf` names them). One round
 * trip and one implicit transaction per batch instead of eight. The text does not depend on the batch size, so it runs
 * as a named (server-side prepared) statement: each pooled connection parses it once, then only
 * binds and runs it, which is CPU the database server no longer spends per batch (the
 * benchmark's bottleneck on a shared machine). `available_at` is the creation time, so
 * new runs queue behind timers that fell due earlier instead of ahead of them.
 */
import type { Db } from '../../storage/database.js';
import { postgresPoolOf } from '../../storage/connect.js';
import type { CreateOutcome, PreparedRun } from '../run-creator.js';
import { claimantsOf, readStandingClaims } from './claims.js';
import { runCreatedAudit } from './run-audit.js';

const CREATE_RUNS_SQL = `
  with input as (
    select * from unnest(
      $1::text[], $2::text[],
      $3::text[], $4::text[],
      $5::integer[], $6::text[],
      $7::text[], $8::text[],
      $9::text[], $10::text[],
      $11::text[],
      $12::text[], $13::text[],
      $14::text[], $15::text[],
      $16::text[], $17::text[],
      $18::text[], $19::text[]
    ) with ordinality as t(run_id, workspace_id, trigger_id, source_id, source_version, name,
                           idempotency_key, status, payload, subject_record_id, at,
                           claim_key, claim_fingerprint,
                           audit_id, tenant_id, request_id, key_id, key_name, audit_details, position)
  ),
  claims as (
    insert into idempotency_keys (workspace_id, key, fingerprint, trigger_id, run_id, created_at)
    select workspace_id, claim_key, claim_fingerprint, trigger_id, run_id, at
    from input where claim_key is not null order by position
    on conflict (workspace_id, key) do nothing
    returning run_id
  ),
  winners as (
    select * from input where claim_key is null or run_id in (select run_id from claims)
  ),
  new_runs as (
    insert into runs (id, workspace_id, trigger_id, source_id, source_version, name, idempotency_key,
                      automation_status, error, payload, subject_record_id, created_at, updated_at, available_at)
    select run_id, workspace_id, trigger_id, source_id, source_version, name, idempotency_key,
           status, null, payload, subject_record_id, at, at, at
    from winners
    returning id
  ),
  new_records as (
    insert into records (id, workspace_id, resource_type, ext_id, name, created_at, updated_at)
    select run_id, workspace_id, 'Pathway', run_id, name, at, at from winners
  ),
  new_tags as (
    insert into record_tags (record_id, workspace_id, tag)
    select run_id, workspace_id, status from winners
  ),
  new_audit as (
    insert into audit_events (id, tenant_id, workspace_id, at, action, request_id, key_id, key_name,
                              resource_type, resource_id, outcome, details)
    select audit_id, tenant_id, workspace_id, at, 'run.create', request_id, key_id, key_name,
           'run', run_id, 'success', audit_details
    from winners
  ),
  new_audit_records as (
    insert into audit_event_records (workspace_id, record_id, event_id)
    select workspace_id, run_id, audit_id from winners
    union all
    select workspace_id, subject_record_id, audit_id from winners where subject_record_id is not null and subject_record_id <> run_id
  )
  select id from new_runs`;

export async function writeBatchOnPostgres(db: Db, runs: PreparedRun[]): Promise<CreateOutcome[]> {
  const outcomes: (CreateOutcome | null)[] = runs.map(() => null);
  const claimants = new Set(claimantsOf(runs));
  // Runs that share a key with an earlier run of this batch do not take part; they read the claim.
  const candidates = runs.map((run, i) => ({ run, i })).filter(({ run, i }) => !run.claim || claimants.has(i));
  // Claimants first, in key order (lock order), then the runs without a key.
  candidates.sort((a, b) => {
    const ka = a.run.claim ? `${a.run.ctx.workspaceId}\u0000${a.run.claim.key}` : '\uffff';
    const kb = b.run.claim ? `${b.run.ctx.workspaceId}\u0000${b.run.claim.key}` : '\uffff';
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });

  const column = <T>(pick: (run: PreparedRun) => T) => candidates.map(({ run }) => pick(run));
  const audits = candidates.map(({ run }) => runCreatedAudit(run));

  const pool = postgresPoolOf(db);
  if (!pool) throw new Error('writeBatchOnPostgres needs a PostgreSQL store opened by storage/connect.ts');
  const written = await pool.query<{ id: string }>({
    name: 'carepath_create_runs_v2',
    text: CREATE_RUNS_SQL,
    values: [
      column((r) => r.runId),
      column((r) => r.ctx.workspaceId),
      column((r) => r.triggerId),
      column((r) => r.blueprint.id),
      column((r) => r.blueprint.version),
      column((r) => r.blueprint.name),
      column((r) => r.idempotencyKey),
      column((r) => r.status),
      column((r) => r.payloadJson),
      column((r) => r.subjectRecordId),
      column((r) => r.at),
      column((r) => r.claim?.key ?? null),
      column((r) => r.claim?.fingerprint ?? null),
      audits.map((a) => a.id),
      audits.map((a) => a.tenant_id),
      audits.map((a) => a.request_id),
      audits.map((a) => a.key_id),
      audits.map((a) => a.key_name),
      audits.map((a) => a.details),
    ],
  });

  const created = new Set(written.rows.map((row) => row.id));
  runs.forEach((run, i) => {
    if (created.has(run.runId)) outcomes[i] = { kind: 'created', runId: run.runId };
  });
  return readStandingClaims(db, runs, outcomes);
}
