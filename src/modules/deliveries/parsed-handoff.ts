/**
 * Read delivery bodies (their digests, delivery-reader.ts) handed from the intake to a delivery
 * processor running in the same process (`carepath serve`), so a body is parsed once, not once
 * to answer 400 and again to process it. The stored raw body stays the durable copy: a processor
 * in another process, a retry, or a delivery whose digest was not kept here reads the stored
 * bytes again.
 *
 * Kept only while a processor of this store runs in the process (`attach`), so an API-only
 * process holds nothing, and bounded by body bytes: when full, the oldest entries go (their
 * deliveries are then read from the store). An entry is taken once; nothing here is durable.
 *
 * Claimed at intake: while a processor runs here, the intake stores a delivery already claimed
 * for it (`processing` under its lease) and leaves the row here, so the processor takes it
 * without a claim UPDATE, which on SQLite rewrote the whole stored body (about as costly as its
 * INSERT). Durably it is a claimed delivery like any other: if this process dies, the lease runs
 * out and any processor claims it; a processor that stops hands its unstarted ones back
 * (`releaseDeliveries`).
 *
 * One handoff per store handle (the `Db` the intake and the processor share), not per module:
 * two containers in one process (tests) never see each other's deliveries.
 */
import type { DeliveryDigest } from '../../ingestion/delivery-digest.js';
import type { DeliveryRow } from './delivery.repository.js';
import { weakMemo } from '../../lib/weak-memo.js';

/** The processor that deliveries stored in this process are claimed for at intake. */
export interface IntakeClaimant {
  owner: string;
  leaseMs: number;
}

/** Body bytes whose digest may wait here for the processor (a digest is about as large as its body). */
export const DEFAULT_HANDOFF_BYTES = 32 * 1024 * 1024;

interface Entry {
  /** the digest, on its way from the reader's thread (its rejection is already handled) */
  digest: Promise<DeliveryDigest>;
  bytes: number;
}

export class ParsedHandoff {
  private readonly entries = new Map<string, Entry>();
  private heldBytes = 0;
  private processors = 0;
  private readonly claimants: IntakeClaimant[] = [];
  /** Deliveries stored already claimed for a claimant (rows without body), in arrival order. */
  private readonly claimedRows = new Map<string, DeliveryRow>();

  constructor(private readonly maxBytes: number = DEFAULT_HANDOFF_BYTES) {}

  /**
   * A processor of this store started in this process; until `detach`, digests are kept. With a
   * claimant, the intake stores deliveries already claimed for it (`claimant`, `offerClaimed`).
   */
  attach(claimant?: IntakeClaimant): void {
    this.processors++;
    if (claimant) this.claimants.push(claimant);
  }

  detach(claimant?: IntakeClaimant): void {
    this.processors = Math.max(0, this.processors - 1);
    if (claimant) {
      const at = this.claimants.indexOf(claimant);
      if (at >= 0) this.claimants.splice(at, 1);
      for (const [id, row] of this.claimedRows) if (row.lease_owner === claimant.owner) this.claimedRows.delete(id);
    }
    if (this.processors === 0) this.clear();
  }

  /** The processor the intake claims new deliveries for, if one runs here. */
  get claimant(): IntakeClaimant | undefined {
    return this.claimants[0];
  }

  /**
   * A delivery stored already claimed by `row.lease_owner`, with its digest. The row (small) stays
   * until that processor takes it; the digest may be dropped for room like any other (the
   * processor then reads the stored body).
   */
  offerClaimed(row: DeliveryRow, digest: Promise<DeliveryDigest>, bytes: number): void {
    // Its processor stopped while the INSERT ran: the lease runs out and any processor claims it.
    if (!this.claimants.some((claimant) => claimant.owner === row.lease_owner)) return;
    this.claimedRows.set(row.id, { ...row, body: null });
    this.offer(row.id, digest, bytes);
  }

  /** Up to `limit` deliveries claimed at intake for `owner`, oldest first, each once. */
  takeClaimed(owner: string, limit: number): DeliveryRow[] {
    const taken: DeliveryRow[] = [];
    for (const [id, row] of this.claimedRows) {
      if (taken.length >= limit) break;
      if (row.lease_owner !== owner) continue;
      this.claimedRows.delete(id);
      taken.push(row);
    }
    return taken;
  }

  /** Ids of the deliveries claimed at intake for `owner` and not taken yet. */
  claimedFor(owner: string): string[] {
    return [...this.claimedRows.values()].filter((row) => row.lease_owner === owner).map((row) => row.id);
  }

  /** Whether a processor here may take digests (so the intake keeps them, and claims skip bodies). */
  get active(): boolean {
    return this.processors > 0;
  }

  /** Keeps the digest of a stored delivery's body; ignored when no processor runs here or it is too large. */
  offer(deliveryId: string, digest: Promise<DeliveryDigest>, bytes: number): void {
    if (!this.active || bytes > this.maxBytes) return;
    // Insertion order is arrival order: the oldest entries make room first.
    for (const [id, entry] of this.entries) {
      if (this.heldBytes + bytes <= this.maxBytes) break;
      this.entries.delete(id);
      this.heldBytes -= entry.bytes;
    }
    this.entries.set(deliveryId, { digest, bytes });
    this.heldBytes += bytes;
  }

  /** The digest of this delivery's body, once; undefined when it was not kept (read the stored body). */
  take(deliveryId: string): Promise<DeliveryDigest> | undefined {
    const entry = this.entries.get(deliveryId);
    if (!entry) return undefined;
    this.entries.delete(deliveryId);
    this.heldBytes -= entry.bytes;
    return entry.digest;
  }

  has(deliveryId: string): boolean {
    return this.entries.has(deliveryId);
  }

  get size(): number {
    return this.entries.size;
  }

  private clear(): void {
    this.entries.clear();
    this.claimedRows.clear();
    this.heldBytes = 0;
  }
}

/** The handoff of one store handle (created on first use). */
export const parsedHandoffFor: (db: object) => ParsedHandoff = weakMemo(() => new ParsedHandoff());
