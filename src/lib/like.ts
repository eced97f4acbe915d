import { sql, type RawBuilder } from 'kysely';

/**
 * Text as a case-insensitive match compares it: lower case for every script (not ASCII only), and
 * where JavaScript's lower case and PostgreSQL's differ, PostgreSQL's: Greek final sigma as sigma
 * (JavaScript lowers by where the letter stands, PostgreSQL does not), and `İ` as `i`
 * (JavaScript keeps its dot as U+0307: `q=İstanbul` missed "İstanbul" on PostgreSQL).
 */
export function foldCase(text: string): string {
  return text.toLowerCase().replace(/ς/g, 'σ').replace(/i\u0307/g, 'i');
}

/** `foldCase` as an SQL function, given to every SQLite connection (storage/connect.ts). */
export const SQLITE_FOLD_CASE = 'carepath_fold_case';

/**
 * Case-insensitive "contains" for name searches, with `%`, `_` and `\` in the user's words taken
 * literally. The explicit ESCAPE clause makes SQLite and PostgreSQL agree. The words are folded
 * here, the column by the store: SQLite's own `lower` knows ASCII letters only ("Émile" found
 * nothing), so there it is `foldCase` itself; on PostgreSQL `lower` (by the database's ctype,
 * which must know Unicode: any UTF-8 locale does) and the sigma rule.
 */
export function nameContains(column: string, words: string, dialect: 'sqlite' | 'postgres'): RawBuilder<boolean> {
  const pattern = `%${foldCase(words).replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const folded = dialect === 'postgres' ? sql`translate(lower(${sql.ref(column)}), 'ς', 'σ')` : sql`${sql.raw(SQLITE_FOLD_CASE)}(${sql.ref(column)})`;
  return sql<boolean>`${folded} like ${pattern} escape '\\'`;
}
