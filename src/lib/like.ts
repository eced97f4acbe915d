import { sql, type RawBuilder } from 'kysely';

/**
 * Case-insensitive "contains" for name searches, with `%`, `_` and `\` in the user's words taken
 * literally. The explicit ESCAPE clause makes SQLite and PostgreSQL agree.
 */
export function nameContains(column: string, words: string): RawBuilder<boolean> {
  const pattern = `%${words.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return sql<boolean>`lower(${sql.ref(column)}) like ${pattern} escape '\\'`;
}
