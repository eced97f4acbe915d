/**
 * Writes one batch of new runs on SQLite (PostgreSQL: batch-writer-postgres.ts): one IMMEDIATE
 * transaction of single-row INSERTs through statements prepared once per connection, run on the
 * serving connection synchronously while Kysely's lock on it is held (`db.connection()`), so no
 * other caller's statements can interleave with them.
 *
 * Why not Kysely's builder here: building and compiling a multi-row INSERT per table for every
 * batch, with a new statement text for every batch size, cost more CPU than SQLite's own work
 * (--cpu-prof, docs/decisions.md). On SQLite a prepared single-row INSERT run n times inside
 * one transaction does the same B-tree work as one n-row INSERT, so nothing is lost by it.
 *
 * Tried and not kept (docs/decisions.md): the same statements on a thread of their own, with a
 * second connection. On this 2-core machine it moved CPU from the serving thread to the
 * writer's without raising fires per second.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { Db } from '../../storage/database.js';
import { sqliteConnectionOf } from '../../storage/connect.js';
import type { CreateOutcome, PreparedRun } from '../run-creator.js';
import { claimantsOf } from './claims.js';
import { runCreatedAudit } from './run-audit.js';

/** The SQLite writer for `db`, or undefined when `db` is not a SQLite store opened by storage/connect.ts. */
export function sqliteBatchWriter(db: Db): ((runs: PreparedRun[]) => Promise<CreateOutcome[]>) | undefined {
  const connection = sqliteConnectionOf(db);
  if (!connection) return undefined;
  let write: ((runs: PreparedRun[]) => CreateOutcome[]) | undefined;
  return (runs) =>
    db.connection().execute(async () => {
      write ??= runWriter(connection);
      return write(runs);
    });
}

/** Writes batches of runs on `connection`; the caller makes sure nothing else uses it meanwhile. */
function runWriter(connection: BetterSqlite3.Database): (runs: PreparedRun[]) => CreateOutcome[] {
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
  // The Pathway records and their status tags: ONE statement each per batch (rows as one JSON
  // parameter), not one per run. Both tables carry row triggers (the tag change log), and a
  // statement that fires triggers inside a transaction opens a statement journal and runs its
  // trigger programs for itself: per run, the two cost 22–26 µs, per batch 11–15 µs a run
  // (48-run batches, alternating, on this machine). Records first: the tag trigger reads them.
  const records = connection.prepare(
    `insert into records (id, workspace_id, resource_type, ext_id, name, created_at, updated_at)
     select value ->> 0, value ->> 1, 'Pathway', value ->> 0, value ->> 2, value ->> 3, value ->> 3 from json_each(?)`,
  );
  const tags = connection.prepare(
    `insert into record_tags (record_id, workspace_id, tag) select value ->> 0, value ->> 1, value ->> 4 from json_each(?)`,
  );
  // The run.create events' rows in the audit index by record (the run's Pathway record and its
  // subject, as `recordIdsOf` names them): one statement per batch, from the same JSON rows.
  const auditRecords = connection.prepare(
    `with written as (select value from json_each(?))
     insert into audit_event_records (workspace_id, record_id, event_id)
     select value ->> 1, value ->> 0, value ->> 5 from written
     union all
     select value ->> 1, value ->> 6, value ->> 5 from written where value ->> 6 is not null and value ->> 6 <> value ->> 0`,
  );
  const audit = connection.prepare(
    `insert into audit_events (id, tenant_id, workspace_id, at, action, request_id, key_id, key_name,
                               resource_type, resource_id, outcome, details)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const standing = connection.prepare(
    `select run_id, fingerprint, trigger_id from idempotency_keys where workspace_id = ? and key = ?`,
  );

  function writeBatch(runs: PreparedRun[]): CreateOutcome[] {
    const outcomes: (CreateOutcome | null)[] = runs.map(() => null);
    const won = new Set<number>();
    for (const i of claimantsOf(runs)) {
      const r = runs[i];
      const { changes } = claim.run(r.ctx.workspaceId, r.claim!.key, r.claim!.fingerprint, r.triggerId, r.runId, r.at);
      if (changes === 1) won.add(i);
    }

    // [run id, workspace, name, at, status, audit event id, subject record id] of each run
    // written, for the records, tags and audit index rows.
    const pathways: [string, string, string, string, string, string, string | null][] = [];
    runs.forEach((r, i) => {
      if (r.claim && !won.has(i)) return;
      const workspaceId = r.ctx.workspaceId;
      run.run(
        r.runId, workspaceId, r.triggerId, r.blueprint.id, r.blueprint.version, r.blueprint.name, r.idempotencyKey,
        r.status, r.payloadJson, r.subjectRecordId, r.at, r.at, r.at,
      );
      const a = runCreatedAudit(r);
      pathways.push([r.runId, workspaceId, r.blueprint.name, r.at, r.status, a.id, r.subjectRecordId]);
      audit.run(a.id, a.tenant_id, a.workspace_id, a.at, a.action, a.request_id, a.key_id, a.key_name,
        a.resource_type, a.resource_id, a.outcome, a.details);
      outcomes[i] = { kind: 'created', runId: r.runId };
    });
    if (pathways.length > 0) {
      const rows = JSON.stringify(pathways);
      records.run(rows);
      tags.run(rows);
      auditRecords.run(rows);
    }

    // Runs not written read the claim that stands (earlier, another process, or this batch).
    return outcomes.map((outcome, i) => {
      if (outcome) return outcome;
      const found = standing.get(runs[i].ctx.workspaceId, runs[i].claim!.key) as
        | { run_id: string; fingerprint: string; trigger_id: string }
        | undefined;
      if (!found) throw new Error('idempotency claim missing after its batch');
      return { kind: 'claimed-before', runId: found.run_id, fingerprint: found.fingerprint, triggerId: found.trigger_id };
    });
  }

  // IMMEDIATE: the transaction writes at once, so it takes the write lock up front.
  return connection.transaction(writeBatch).immediate as (runs: PreparedRun[]) => CreateOutcome[];
}
