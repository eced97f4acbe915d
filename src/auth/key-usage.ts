import type { Db } from '../storage/database.js';
import type { Clock } from '../lib/clock.js';
import { touchKeys } from './key.repository.js';

/**
 * `lastUsedAt` follows every successful call, written at most once a second per process
 * (DESIGN §3): one UPDATE for all keys used in that second instead of a write per request.
 */
export class KeyUsageRecorder {
  private used = new Set<string>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly onError: (error: unknown) => void,
  ) {}

  record(keyId: string): void {
    this.used.add(keyId);
    if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), 1000);
      this.timer.unref();
    }
  }

  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const keyIds = [...this.used];
    this.used = new Set();
    try {
      await touchKeys(this.db, keyIds, this.clock.now().toISOString());
    } catch (error) {
      this.onError(error);
    }
  }
}
