/**
 * Writes one batch of new runs on SQLite: one transaction of single-row INSERTs through
 * statements prepared once per connection (PostgreSQL uses batch-writer-postgres.ts).
 *
 * Why not Kysely's builder here: building and compiling a multi-row INSERT per table for every
 * batch, with a new statement text for every batch size, cost more CPU than SQLite's own work
 * (--cpu-prof, docs/decisions.md). On SQLite a prepared single-row INSERT run n times inside
 * one transaction does the same B-tree work as one n-row INSERT, so nothing is lost by it.
 *
 * The whole transaction runs synchronously while Kysely's lock on the one connection is held
 * (`db.connection()`), so no other caller's statements can interleave with it.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { Db } from '../../storage/database.js';
import { sqliteConnectionOf } from '../../storage/connect.js';
import { auditRow } from '../../modules/audit/audit.repository.js';
import type { CreateOutcome, PreparedRun } from '../run-creator.js';
import { claimantsOf } from './claims.js';

interface Statements {
  claim: BetterSqlite3.Statement;
  run: BetterSqlite3.Statement;
  record: BetterSqlite3.Statement;
  tag: BetterSqlite3.Statement;
  audit: BetterSqlite3.Statement;
  standing: BetterSqlite3.Statement;
  write: (runs: PreparedRun[]) => CreateOutcome[];
}

const prepared = new WeakMap<BetterSqlite3.Database, Statements>();

function statementsOf(connection: BetterSqlite3.Database): Statements {
  let statements = prepared.get(connection);
  if (!statements) {
    const made: Omit<Statements, 'write'> = {
      claim: connection.prepare(
        `insert into idempotency_keys (workspace_id, key, fingerprint, trigger_id, run_id, created_at)
         values (?, ?, ?, ?, ?, ?) on conflict (workspace_id, key) do nothing`,
      ),
      // available_at = created_at: due from its creation, queued behind timers that fell due earlier.
      run: connection.prepare(
        `insert into runs (id, workspace_id, trigger_id, source_id, source_version, name, idempotency_key,
                           automation_status, error, payload, subject_record_id, created_at, updated_at, available_at)
         values (?, ?, ?, ?, ?, ?, ?, ?, null, ?, ?, ?, ?, ?)`,
      ),
      record: connection.prepare(
        `insert into records (id, workspace_id, resource_type, ext_id, name, created_at, updated_at)
         values (?, ?, 'Pathway', ?, ?, ?, ?)`,
      ),
      tag: connection.prepare(`insert into record_tags (record_id, workspace_id, tag) values (?, ?, ?)`),
      audit: connection.prepare(
        `insert into audit_events (id, tenant_id, workspace_id, at, action, request_id, key_id, key_name,
                                   resource_type, resource_id, outcome, details)
         values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      standing: connection.prepare(
        `select run_id, fingerprint, trigger_id from idempotency_keys where workspace_id = ? and key = ?`,
      ),
    };
    // IMMEDIATE: the transaction writes at once, so it takes the write lock up front.
    const write = connection.transaction((runs: PreparedRun[]) => writeBatch(made, runs)).immediate;
    statements = { ...made, write: write as (runs: PreparedRun[]) => CreateOutcome[] };
    prepared.set(connection, statements);
  }
  return statements;
}

function writeBatch(s: Omit<Statements, 'write'>, runs: PreparedRun[]): CreateOutcome[] {
  const outcomes: (CreateOutcome | null)[] = runs.map(() => null);
  const won = new Set<number>();
  for (const i of claimantsOf(runs)) {
    const run = runs[i];
    const claim = run.claim!;
    const { changes } = s.claim.run(run.ctx.workspaceId, claim.key, claim.fingerprint, run.triggerId, run.runId, run.at);
    if (changes === 1) won.add(i);
  }

  runs.forEach((run, i) => {
    if (run.claim && !won.has(i)) return;
    const workspaceId = run.ctx.workspaceId;
    s.run.run(
      run.runId, workspaceId, run.triggerId, run.blueprint.id, run.blueprint.version, run.blueprint.name,
      run.idempotencyKey, run.status, run.payloadJson, run.subjectRecordId, run.at, run.at, run.at,
    );
    s.record.run(run.runId, workspaceId, run.runId, run.blueprint.name, run.at, run.at);
    s.tag.run(run.runId, workspaceId, run.status);
    const audit = auditRow(run.ctx, run.at, {
      action: 'run.create',
      resourceType: 'run',
      resourceId: run.runId,
      details: { triggerId: run.triggerId, sourceId: run.blueprint.id, status: run.status, ...run.origin },
    });
    s.audit.run(
      audit.id, audit.tenant_id, audit.workspace_id, audit.at, audit.action, audit.request_id, audit.key_id,
      audit.key_name, audit.resource_type, audit.resource_id, audit.outcome, audit.details,
    );
    outcomes[i] = { kind: 'created', runId: run.runId };
  });

  // Runs not written read the claim that stands (earlier, another process, or this batch).
  return outcomes.map((outcome, i) => {
    if (outcome) return outcome;
    const row = s.standing.get(runs[i].ctx.workspaceId, runs[i].claim!.key) as
      | { run_id: string; fingerprint: string; trigger_id: string }
      | undefined;
    if (!row) throw new Error('idempotency claim missing after its batch');
    return { kind: 'claimed-before', runId: row.run_id, fingerprint: row.fingerprint, triggerId: row.trigger_id };
  });
}

/** The SQLite writer for `db`, or undefined when `db` is not a SQLite store opened by storage/connect.ts. */
export function sqliteBatchWriter(db: Db): ((runs: PreparedRun[]) => Promise<CreateOutcome[]>) | undefined {
  const connection = sqliteConnectionOf(db);
  if (!connection) return undefined;
  return (runs) => db.connection().execute(async () => statementsOf(connection).write(runs));
}
