/**
 * Parsed delivery bodies handed from the intake to a delivery processor running in the same
 * process (`carepath serve`), so a body is parsed once, not once to answer 400 and again to
 * process it. The stored raw body stays the durable copy: a processor in another process, a
 * retry, or a delivery whose parse was not kept here reads and parses the stored bytes as before.
 *
 * Kept only while a processor of this store runs in the process (`attach`), so an API-only
 * process holds nothing, and bounded by body bytes: when full, the oldest entries go (their
 * deliveries are then parsed from the store). An entry is taken once; nothing here is durable.
 *
 * One handoff per store handle (the `Db` the intake and the processor share), not per module:
 * two containers in one process (tests) never see each other's deliveries.
 */
import type { DeliveryItems } from '../../ingestion/delivery-body.js';

/** Body bytes whose parse may wait here for the processor (the parsed form is a few times larger). */
export const DEFAULT_HANDOFF_BYTES = 32 * 1024 * 1024;

interface Entry {
  parsed: DeliveryItems;
  bytes: number;
}

export class ParsedHandoff {
  private readonly entries = new Map<string, Entry>();
  private heldBytes = 0;
  private processors = 0;

  constructor(private readonly maxBytes: number = DEFAULT_HANDOFF_BYTES) {}

  /** A processor of this store started in this process; until `detach`, parses are kept. */
  attach(): void {
    this.processors++;
  }

  detach(): void {
    this.processors = Math.max(0, this.processors - 1);
    if (this.processors === 0) this.clear();
  }

  /** Whether a processor here may take parses (so the intake keeps them, and claims skip bodies). */
  get active(): boolean {
    return this.processors > 0;
  }

  /** Keeps the parse of a stored delivery's body; ignored when no processor runs here or it is too large. */
  offer(deliveryId: string, parsed: DeliveryItems, bytes: number): void {
    if (!this.active || bytes > this.maxBytes) return;
    // Insertion order is arrival order: the oldest entries make room first.
    for (const [id, entry] of this.entries) {
      if (this.heldBytes + bytes <= this.maxBytes) break;
      this.entries.delete(id);
      this.heldBytes -= entry.bytes;
    }
    this.entries.set(deliveryId, { parsed, bytes });
    this.heldBytes += bytes;
  }

  /** The parse of this delivery's body, once; undefined when it was not kept (parse the stored body). */
  take(deliveryId: string): DeliveryItems | undefined {
    const entry = this.entries.get(deliveryId);
    if (!entry) return undefined;
    this.entries.delete(deliveryId);
    this.heldBytes -= entry.bytes;
    return entry.parsed;
  }

  has(deliveryId: string): boolean {
    return this.entries.has(deliveryId);
  }

  get size(): number {
    return this.entries.size;
  }

  private clear(): void {
    this.entries.clear();
    this.heldBytes = 0;
  }
}

const byStore = new WeakMap<object, ParsedHandoff>();

/** The handoff of one store handle (created on first use). */
export function parsedHandoffFor(db: object): ParsedHandoff {
  let handoff = byStore.get(db);
  if (!handoff) {
    handoff = new ParsedHandoff();
    byStore.set(db, handoff);
  }
  return handoff;
}
