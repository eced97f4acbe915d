/**
 * SQLite: the batches of a walk of the order index (search.repository.ts `walkOrderIndex`) read
 * through statements prepared once per connection, as bare positions.
 *
 * Why: a walk reads thousands of index entries to find a page of 50 when matches are rare (about
 * 3,200 for 2% of a million records). Through the query builder each entry became a row object
 * and each batch a statement built and compiled again; a plucked prepared statement hands back
 * the positions as an array of numbers. The SQL is the builder's, word for word: the same index,
 * the same collation, the same keyset continuation.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { DbOrTx } from '../../storage/database.js';
import { sqliteRunnerOf } from '../../storage/connect.js';
import { weakMemo } from '../../lib/weak-memo.js';
import type { OrderColumn } from './walk-in-store.js';

/** The sort key of the entry a batch continues after. */
export interface WalkAfter {
  value: string;
  id: string;
}

export type WalkBatchReader = (after: WalkAfter | null, batch: number) => Promise<number[]>;

/** Per connection, the walk statements prepared so far, by text. */
const statementsOf = weakMemo((_connection: BetterSqlite3.Database) => new Map<string, BetterSqlite3.Statement>());

function walkSql(column: OrderColumn, direction: 'asc' | 'desc', continued: boolean): string {
  // `column` and `direction` come from closed sets (ORDER_COLUMN, the schema's enum), never from input text.
  const after = continued ? ` and (records.${column}, records.id) ${direction === 'asc' ? '>' : '<'} (?, ?)` : '';
  return (
    `select records.seq from records where records.workspace_id = ? and records.resource_type = ?${after} ` +
    `order by records.${column} ${direction}, records.id ${direction} limit ?`
  );
}

function statementFor(connection: BetterSqlite3.Database, text: string): BetterSqlite3.Statement {
  const byText = statementsOf(connection);
  let statement = byText.get(text);
  if (!statement) byText.set(text, (statement = connection.prepare(text).pluck()));
  return statement;
}

/**
 * The batch reader for a walk on `db`, or undefined where the query builder must do it
 * (PostgreSQL, or inside a transaction, whose statements must run on its own connection turn).
 */
export function sqliteWalkReader(
  db: DbOrTx,
  workspaceId: string,
  resourceType: string,
  column: OrderColumn,
  direction: 'asc' | 'desc',
): WalkBatchReader | undefined {
  const run = sqliteRunnerOf(db);
  if (!run) return undefined;
  return (after, batch) =>
    run((connection) => {
      const statement = statementFor(connection, walkSql(column, direction, after !== null));
      const seqs = after
        ? statement.all(workspaceId, resourceType, after.value, after.id, batch)
        : statement.all(workspaceId, resourceType, batch);
      return seqs as number[];
    });
}
