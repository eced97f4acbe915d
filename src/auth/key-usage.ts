import type { Db } from '../storage/database.js';
import type { Clock } from '../lib/clock.js';
import { touchKeys } from './key.repository.js';

/**
 * `lastUsedAt` follows every successful call, written at most once a second per process
 * (DESIGN §3) instead of a write per request. It is the time of the key's last call in that
 * second, not of the write: stamped at the write, it read up to a second late, later than the
 * key's revocation for a call answered just before it (an auditor reads that as a revoked key
 * used: a review, 2026-11-28). The write never moves it back (another process, a clock behind).
 */
export class KeyUsageRecorder {
  private used = new Map<string, string>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly onError: (error: unknown) => void,
  ) {}

  record(keyId: string): void {
    this.used.set(keyId, this.clock.now().toISOString());
    if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), 1000);
      this.timer.unref();
    }
  }

  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const used = this.used;
    this.used = new Map();
    try {
      await touchKeys(this.db, used);
    } catch (error) {
      this.onError(error);
    }
  }
}
