/**
 * Many rows as ONE parameter: a JSON array of arrays, turned into rows by the store itself
 * (`json_each` on SQLite, `json_array_elements` on PostgreSQL; each row is the JSON `value`,
 * its fields `value ->> 0`, `value ->> 1`, …; JSON null reads as SQL NULL).
 *
 * Why: a delivery's resource states are written and read with one statement whatever its size.
 * Built with Kysely's `values()`, 300 rows of 8 columns cost 2,400 parsed value nodes and bound
 * parameters (and chunks under the stores' parameter limits); reading 300 (type, id) pairs as
 * `type IN (…) AND id IN (…)` probes the index for every type × id combination.
 */
import { sql, type RawBuilder } from 'kysely';
import type { Dialect } from '../../storage/connect.js';

export function jsonRows(dialect: Dialect, rows: readonly (readonly (string | null)[])[]): RawBuilder<unknown> {
  const json = JSON.stringify(rows);
  return dialect === 'postgres' ? sql`json_array_elements(cast(${json} as json))` : sql`json_each(${json})`;
}
