/**
 * Writes one batch of new runs on SQLite (PostgreSQL: batch-writer-postgres.ts): the statements
 * of sqlite-run-rows.ts on the serving connection, run synchronously while Kysely's lock on it
 * is held (`db.connection()`), so no other caller's statements can interleave with them.
 *
 * Tried and not kept (docs/decisions.md): the same statements on a thread of their own, with a
 * second connection. On this 2-core machine, where the load generator shares the cores, it
 * moved CPU from the serving thread to the writer's without raising fires per second.
 */
import type { Db } from '../../storage/database.js';
import { sqliteConnectionOf } from '../../storage/connect.js';
import { auditRow } from '../../modules/audit/audit.repository.js';
import type { CreateOutcome, PreparedRun } from '../run-creator.js';
import { runRowWriter, toRunRow, type RunRow } from './sqlite-run-rows.js';

function rowsOf(runs: PreparedRun[]): RunRow[] {
  return runs.map((run) =>
    toRunRow(
      run,
      auditRow(run.ctx, run.at, {
        action: 'run.create',
        resourceType: 'run',
        resourceId: run.runId,
        details: { triggerId: run.triggerId, sourceId: run.blueprint.id, status: run.status, ...run.origin },
      }),
    ),
  );
}

/** The SQLite writer for `db`, or undefined when `db` is not a SQLite store opened by storage/connect.ts. */
export function sqliteBatchWriter(db: Db): ((runs: PreparedRun[]) => Promise<CreateOutcome[]>) | undefined {
  const connection = sqliteConnectionOf(db);
  if (!connection) return undefined;
  let write: ((rows: RunRow[]) => CreateOutcome[]) | undefined;
  return (runs) =>
    db.connection().execute(async () => {
      write ??= runRowWriter(connection);
      return write(rowsOf(runs));
    });
}
