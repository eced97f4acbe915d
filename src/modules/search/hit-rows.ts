/**
 * A hit as the page statements read it: one row per record, its tags gathered by the store in
 * tag order (an array on PostgreSQL, a JSON array as text from SQLite's `json_group_array`).
 * Shared by the page reads of search.repository.ts and walk-in-store.ts.
 *
 * Why one row per record: a row per (record, tag), sorted by tag, read 4 to 6 rows a record at
 * the benchmark's million records, and the sort and the rows cost more than the aggregate: on
 * SQLite 0.65–0.75 ms a page of 50 against 0.41 (the tags' own index gives them in order).
 */
import type { ResourceType, SearchHit } from './search.schemas.js';

export interface HitRow {
  seq: number | string;
  id: string;
  ext_id: string;
  name: string;
  resource_type: ResourceType;
  tags: string[] | string;
}

export function hitOf(row: HitRow): SearchHit {
  const tags = typeof row.tags === 'string' ? (JSON.parse(row.tags) as string[]) : row.tags;
  return { id: row.id, extId: row.ext_id, name: row.name, resourceType: row.resource_type, tags };
}
