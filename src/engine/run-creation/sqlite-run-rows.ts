/**
 * The SQLite statements that write a batch of new runs, on a better-sqlite3 connection: one
 * IMMEDIATE transaction of single-row INSERTs through statements prepared once per connection.
 * batch-writer-sqlite.ts runs them on the serving connection.
 *
 * Why not Kysely's builder here: building and compiling a multi-row INSERT per table for every
 * batch, with a new statement text for every batch size, cost more CPU than SQLite's own work
 * (--cpu-prof, docs/decisions.md). On SQLite a prepared single-row INSERT run n times inside
 * one transaction does the same B-tree work as one n-row INSERT, so nothing is lost by it.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { CreateOutcome, PreparedRun } from '../run-creator.js';
import { claimantsOf } from './claims.js';

/** One new run as the plain values its statements bind. */
export interface RunRow {
  workspaceId: string;
  runId: string;
  triggerId: string;
  sourceId: string;
  sourceVersion: number;
  name: string;
  idempotencyKey: string | null;
  status: string;
  payloadJson: string | null;
  subjectRecordId: string | null;
  at: string;
  claim: { key: string; fingerprint: string } | null;
  /** The `run.create` audit row's values, in the audit INSERT's column order. */
  audit: unknown[];
}

/** A prepared run as a row; `audit` is its `run.create` event (audit.repository.ts auditRow). */
export function toRunRow(run: PreparedRun, audit: Record<string, unknown>): RunRow {
  return {
    workspaceId: run.ctx.workspaceId,
    runId: run.runId,
    triggerId: run.triggerId,
    sourceId: run.blueprint.id,
    sourceVersion: run.blueprint.version,
    name: run.blueprint.name,
    idempotencyKey: run.idempotencyKey,
    status: run.status,
    payloadJson: run.payloadJson,
    subjectRecordId: run.subjectRecordId,
    at: run.at,
    claim: run.claim,
    audit: AUDIT_COLUMNS.map((column) => audit[column]),
  };
}

const AUDIT_COLUMNS = [
  'id', 'tenant_id', 'workspace_id', 'at', 'action', 'request_id', 'key_id', 'key_name',
  'resource_type', 'resource_id', 'outcome', 'details',
] as const;

/** Writes batches of runs on `connection`; the caller makes sure nothing else uses it meanwhile. */
export function runRowWriter(connection: BetterSqlite3.Database): (rows: RunRow[]) => CreateOutcome[] {
  const claim = connection.prepare(
    `insert into idempotency_keys (workspace_id, key, fingerprint, trigger_id, run_id, created_at)
     values (?, ?, ?, ?, ?, ?) on conflict (workspace_id, key) do nothing`,
  );
  // available_at = created_at: due from its creation, queued behind timers that fell due earlier.
  const run = connection.prepare(
    `insert into runs (id, workspace_id, trigger_id, source_id, source_version, name, idempotency_key,
                       automation_status, error, payload, subject_record_id, created_at, updated_at, available_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, null, ?, ?, ?, ?, ?)`,
  );
  const record = connection.prepare(
    `insert into records (id, workspace_id, resource_type, ext_id, name, created_at, updated_at)
     values (?, ?, 'Pathway', ?, ?, ?, ?)`,
  );
  const tag = connection.prepare(`insert into record_tags (record_id, workspace_id, tag) values (?, ?, ?)`);
  const audit = connection.prepare(
    `insert into audit_events (${AUDIT_COLUMNS.join(', ')}) values (${AUDIT_COLUMNS.map(() => '?').join(', ')})`,
  );
  const standing = connection.prepare(
    `select run_id, fingerprint, trigger_id from idempotency_keys where workspace_id = ? and key = ?`,
  );

  function writeBatch(rows: RunRow[]): CreateOutcome[] {
    const outcomes: (CreateOutcome | null)[] = rows.map(() => null);
    const won = new Set<number>();
    for (const i of claimantsOf(rows, (row) => row.workspaceId)) {
      const row = rows[i];
      const { changes } = claim.run(row.workspaceId, row.claim!.key, row.claim!.fingerprint, row.triggerId, row.runId, row.at);
      if (changes === 1) won.add(i);
    }

    rows.forEach((row, i) => {
      if (row.claim && !won.has(i)) return;
      run.run(
        row.runId, row.workspaceId, row.triggerId, row.sourceId, row.sourceVersion, row.name, row.idempotencyKey,
        row.status, row.payloadJson, row.subjectRecordId, row.at, row.at, row.at,
      );
      record.run(row.runId, row.workspaceId, row.runId, row.name, row.at, row.at);
      tag.run(row.runId, row.workspaceId, row.status);
      audit.run(...row.audit);
      outcomes[i] = { kind: 'created', runId: row.runId };
    });

    // Runs not written read the claim that stands (earlier, another process, or this batch).
    return outcomes.map((outcome, i) => {
      if (outcome) return outcome;
      const found = standing.get(rows[i].workspaceId, rows[i].claim!.key) as
        | { run_id: string; fingerprint: string; trigger_id: string }
        | undefined;
      if (!found) throw new Error('idempotency claim missing after its batch');
      return { kind: 'claimed-before', runId: found.run_id, fingerprint: found.fingerprint, triggerId: found.trigger_id };
    });
  }

  // IMMEDIATE: the transaction writes at once, so it takes the write lock up front.
  return connection.transaction(writeBatch).immediate as (rows: RunRow[]) => CreateOutcome[];
}
