/**
 * Long lists go to the store in chunks: SQLite allows 32,766 bound parameters per statement and
 * PostgreSQL 65,535, and a 10,000-entry bundle must stay well under both.
 */

/** Ids per `IN (…)` list. */
export const ID_CHUNK = 1000;

export function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
