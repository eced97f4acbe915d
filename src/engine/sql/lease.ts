/** A worker's hold on one run: every write it makes is conditional on this being current. */
export interface Lease {
  runId: string;
  owner: string;
  fence: number;
  /**
   * SQLite: the run was read due and not claimed yet; its first write claims it, in the same
   * transaction (claim-on-write.ts). Until then `fence` is the fence it was read at and the row
   * names no owner. Gone once the claim is committed (and `fence` is the claim's).
   */
  unclaimed?: UnclaimedRun;
}

export interface UnclaimedRun {
  /** The status the run was read in; the claim holds only if it still is. */
  status: 'scheduled' | 'running';
  /**
   * How long the claim leases the run, from the time of the write that claims it (not of the
   * read: a first write late after its read would get a lease already partly spent).
   */
  leaseMs: number;
}
