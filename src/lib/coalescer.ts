/**
 * Coalesces lookups that arrive in the same turn of the event loop into one query, the way
 * DataLoader does: under load, fifty requests that each need one row cost one round trip with
 * `WHERE id IN (…)` instead of fifty. Nothing is cached between turns, so a row that changes
 * (a revoked key, a deactivated trigger) is seen by the very next request.
 */
export class Coalescer<V> {
  private pending = new Map<string, { resolve: (value: V | undefined) => void; reject: (error: unknown) => void }[]>();
  private scheduled = false;

  constructor(
    private readonly loadMany: (keys: string[]) => Promise<Map<string, V>>,
    private readonly maxBatch = 200,
  ) {}

  load(key: string): Promise<V | undefined> {
    return new Promise((resolve, reject) => {
      const waiters = this.pending.get(key);
      if (waiters) waiters.push({ resolve, reject });
      else this.pending.set(key, [{ resolve, reject }]);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const all = [...this.pending];
    this.pending = new Map();
    for (let start = 0; start < all.length; start += this.maxBatch) {
      const batch = all.slice(start, start + this.maxBatch);
      this.loadMany(batch.map(([key]) => key)).then(
        (found) => {
          for (const [key, waiters] of batch) for (const waiter of waiters) waiter.resolve(found.get(key));
        },
        (error) => {
          for (const [, waiters] of batch) for (const waiter of waiters) waiter.reject(error);
        },
      );
    }
  }
}
