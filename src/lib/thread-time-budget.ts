/**
 * Time on the serving thread that one caller may spend on work whose cost it decides: the checks
 * of an expression it sends (parse, cost analysis, a trial run) take microseconds for the usual
 * ones and up to about two seconds for a crafted one of 2,000 characters, time-boxed but not
 * yielding. Within the request rate limit, one key could send such a save every few hundred
 * milliseconds and hold the thread that serves every workspace (a resource review, 2026-11-27).
 *
 * Each caller has `budgetMs` of such work per `windowMs`, spent as it is used and given back
 * evenly over the window (a leaky bucket); past it, 429 `rate_limited` with Retry-After until
 * enough has come back. Per process: each process protects its own thread.
 */
import { performance } from 'node:perf_hooks';
import { ApiError } from './errors.js';

interface Spent {
  ms: number;
  at: number;
}

/** Entries kept before those given back in full are swept out. */
const SWEEP_AT = 10_000;

export class ThreadTimeBudget {
  private readonly spent = new Map<string, Spent>();

  constructor(
    private readonly budgetMs: number,
    private readonly windowMs: number,
    private readonly what: string,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** `work()` charged to `who`; 429 before it starts when `who` has used up its budget. */
  spend<T>(who: string, work: () => T): T {
    const start = this.now();
    const used = this.usedAt(who, start);
    if (used >= this.budgetMs) {
      const waitMs = ((used - this.budgetMs) * this.windowMs) / this.budgetMs;
      throw new ApiError(
        'rate_limited',
        `this key has used its share of the service's time for ${this.what} (${this.budgetMs} ms in ${this.windowMs / 1000} s); one this costly is likely too complex: simplify it, or retry later`,
        { 'Retry-After': String(Math.max(1, Math.ceil(waitMs / 1000))) },
      );
    }
    try {
      return work();
    } finally {
      const end = this.now();
      this.spent.set(who, { ms: this.usedAt(who, end) + (end - start), at: end });
      if (this.spent.size > SWEEP_AT) this.sweep(end);
    }
  }

  /** What `who` has used and not yet been given back, at time `t`. */
  private usedAt(who: string, t: number): number {
    const entry = this.spent.get(who);
    if (!entry) return 0;
    return Math.max(0, entry.ms - ((t - entry.at) * this.budgetMs) / this.windowMs);
  }

  private sweep(t: number): void {
    for (const who of [...this.spent.keys()]) if (this.usedAt(who, t) === 0) this.spent.delete(who);
  }
}
