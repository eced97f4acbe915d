/** A worker's hold on one run: every write it makes is conditional on this being current. */
export interface Lease {
  runId: string;
  owner: string;
  fence: number;
}
