/**
 * Writes one batch of new runs on SQLite (PostgreSQL: batch-writer-postgres.ts).
 *
 * A store in a file gets the writer thread (sqlite-writer-thread.ts): its own connection and
 * core. An in-memory store exists only on its one connection, so there the same statements
 * (sqlite-run-rows.ts) run on the serving connection, synchronously while Kysely's lock on it is
 * held (`db.connection()`), so no other caller's statements can interleave with them.
 */
import type { Db } from '../../storage/database.js';
import { sqliteConnectionOf } from '../../storage/connect.js';
import { auditRow } from '../../modules/audit/audit.repository.js';
import type { CreateOutcome, PreparedRun } from '../run-creator.js';
import { runRowWriter, toRunRow, type RunRow } from './sqlite-run-rows.js';
import { SqliteWriterThread } from './sqlite-writer-thread.js';

export interface SqliteBatchWriter {
  write(runs: PreparedRun[]): Promise<CreateOutcome[]>;
  /** Starts the thread now rather than with the first batch. */
  warm(): void;
  close(): Promise<void>;
}

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
export function sqliteBatchWriter(db: Db): SqliteBatchWriter | undefined {
  const connection = sqliteConnectionOf(db);
  if (!connection) return undefined;
  if (!connection.memory) {
    const thread = new SqliteWriterThread(connection.name);
    return { write: (runs) => thread.write(rowsOf(runs)), warm: () => thread.warm(), close: () => thread.close() };
  }
  let write: ((rows: RunRow[]) => CreateOutcome[]) | undefined;
  return {
    write: (runs) =>
      db.connection().execute(async () => {
        write ??= runRowWriter(connection);
        return write(rowsOf(runs));
      }),
    warm: () => undefined,
    close: async () => undefined,
  };
}
