/**
 * Frozen graphs by blueprint id and version. A version never changes once imported, so a
 * worker may keep what it read for as long as it likes; the bound only caps memory.
 */
import type { DbOrTx } from '../storage/database.js';
import { loadBlueprintGraph } from '../modules/diagrams/diagram.repository.js';
import { readStoredBlueprint } from '../modules/blueprints/blueprint.validate.js';
import { indexGraph, type GraphIndex } from './graph-index.js';

export class GraphCache {
  private readonly entries = new Map<string, Promise<GraphIndex | null>>();

  constructor(
    private readonly db: DbOrTx,
    private readonly maxEntries = 500,
  ) {}

  /** The graph of one blueprint version, or null when it is missing or unreadable. */
  get(blueprintId: string, version: number): Promise<GraphIndex | null> {
    const key = `${blueprintId}@${version}`;
    const hit = this.entries.get(key);
    if (hit) return hit;
    const loading = this.load(blueprintId, version);
    this.entries.set(key, loading);
    // A failed read is not kept: the next claim tries again.
    loading.catch(() => this.entries.delete(key));
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    return loading;
  }

  private async load(blueprintId: string, version: number): Promise<GraphIndex | null> {
    const stored = await loadBlueprintGraph(this.db, blueprintId, version);
    if (stored === null) return null;
    try {
      return indexGraph(readStoredBlueprint(stored));
    } catch {
      return null;
    }
  }
}
