/**
 * Hits as the page statements read them: one row per (record, tag), a record without tags once
 * with a null tag. Read this way by the PostgreSQL walk (walk-in-store.ts), which joins the page with its tags.
 */
import type { ResourceType, SearchHit } from './search.schemas.js';

export interface HitRow {
  seq: number | string;
  id: string;
  ext_id: string;
  name: string;
  resource_type: ResourceType;
  tag: string | null;
}

/** Rows of hits with one row per tag (tags in order) → hits by position, in the rows' order. */
export function hitsOf(rows: HitRow[]): Map<number, SearchHit> {
  const bySeq = new Map<number, SearchHit>();
  for (const row of rows) {
    const seq = Number(row.seq);
    let hit = bySeq.get(seq);
    if (!hit) {
      hit = { id: row.id, extId: row.ext_id, name: row.name, resourceType: row.resource_type, tags: [] };
      bySeq.set(seq, hit);
    }
    if (row.tag !== null) hit.tags.push(row.tag);
  }
  return bySeq;
}
