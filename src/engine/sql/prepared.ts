/**
 * The engine's hot statements (claim, the group commit's guarded UPDATE, step rows, status tag
 * swaps) as SQL text written once, run without going through Kysely's query builder.
 *
 * Why: building and compiling the same query object tree for every batch was about an eighth of
 * a one-node run's CPU on SQLite (`--cpu-prof`, docs/decisions.md). The text of each statement
 * depends only on the number of rows it names, so it is made once per size (and then prepared
 * once by the SQLite statement cache); parameters are bound as always, never spliced in.
 *
 * Statements use `?` placeholders; on PostgreSQL they become `$1…$n`. No statement here has a
 * `?` anywhere else (no string literals with `?`, no jsonb `?` operators).
 */
import { CompiledQuery } from 'kysely';
import type { DbOrTx } from '../../storage/database.js';
import { dialectOfDb } from '../../storage/dialect.js';

export interface SqlResult<R> {
  rows: R[];
  /** Rows changed by an INSERT, UPDATE or DELETE. */
  changed: number;
}

export async function runSql<R = never>(db: DbOrTx, text: string, params: readonly unknown[]): Promise<SqlResult<R>> {
  const postgres = dialectOfDb(db) === 'postgres';
  const result = await db.executeQuery<R>(CompiledQuery.raw(postgres ? numbered(text) : text, params as unknown[]));
  return { rows: result.rows, changed: Number(result.numAffectedRows ?? 0) };
}

/** `(?, ?, …)` with `count` placeholders: an IN list, or one row of a VALUES list. */
export function placeholders(count: number): string {
  let text = cachedLists.get(count);
  if (text === undefined) {
    text = `(${Array.from({ length: count }, () => '?').join(', ')})`;
    cachedLists.set(count, text);
  }
  return text;
}

/** `rows` copies of `row`, comma-separated: the body of a VALUES list. */
export function repeatRows(row: string, rows: number): string {
  return Array.from({ length: rows }, () => row).join(', ');
}

/**
 * A statement text made once per key (usually the number of rows it names): the texts are few
 * (batches are at most a few hundred rows), so the map stays small.
 */
export function memoText<T = string>(cache: Map<number, T>, key: number, make: () => T): T {
  let text = cache.get(key);
  if (text === undefined) {
    text = make();
    cache.set(key, text);
  }
  return text;
}

const cachedLists = new Map<number, string>();
const numberedTexts = new Map<string, string>();

/** The text with PostgreSQL's `$1…$n` for its `?` placeholders. */
export function numbered(text: string): string {
  let result = numberedTexts.get(text);
  if (result === undefined) {
    let n = 0;
    result = text.replace(/\?/g, () => `$${++n}`);
    if (numberedTexts.size > 1000) numberedTexts.clear();
    numberedTexts.set(text, result);
  }
  return result;
}
