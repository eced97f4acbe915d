/**
 * How a background loop (the worker's claims, the delivery processor, the scheduler, the tag
 * folder) logs its failures, so that an outage of the store reads as a few lines and not as a
 * flood: one warning when the store stops answering, one a minute while it still does not (how
 * many tries failed, for how long), and one line when it answers again. A 75 s outage of
 * PostgreSQL was 1,100 error lines with stack frames from one worker (about 30 MB an hour), and
 * the line that mattered, that it was back, was never written.
 *
 * A failure of anything else (a bug, a statement the store refuses) is logged every time, at
 * error with its stack frames: each may be another one.
 */
import type { Logger } from 'pino';
import { isStoreFullError, isTransientStoreError, loggableError } from './store-errors.js';

/** While the store does not answer, one reminder line per this long. */
export const OUTAGE_REMINDER_MS = 60_000;

export class LoopFailureLog {
  /** When the store stopped answering this loop (ms), or null while it answers. */
  private since: number | null = null;
  private failures = 0;
  private lastLine = 0;

  /**
   * @param what the loop's failure in words, as its log lines say it: `claiming runs failed`
   */
  constructor(
    private readonly logger: Logger,
    private readonly what: string,
    private readonly fields: Record<string, unknown> = {},
    private readonly now: () => number = Date.now,
  ) {}

  failed(error: unknown): void {
    if (!isTransientStoreError(error) && !isStoreFullError(error)) {
      this.logger.error({ err: loggableError(error, { frames: true }), ...this.fields }, this.what);
      return;
    }
    this.failures++;
    const at = this.now();
    if (this.since === null) {
      this.since = at;
      this.lastLine = at;
      this.logger.warn({ err: loggableError(error), ...this.fields }, `${this.what}: the store did not answer; trying again until it does`);
      return;
    }
    if (at - this.lastLine < OUTAGE_REMINDER_MS) return;
    this.lastLine = at;
    this.logger.warn(
      { err: loggableError(error), ...this.fields, failures: this.failures, outageMs: at - this.since },
      `${this.what}: the store still does not answer`,
    );
  }

  /** A try went through: after an outage, says it is over. */
  succeeded(): void {
    if (this.since === null) return;
    this.logger.info({ ...this.fields, failures: this.failures, outageMs: this.now() - this.since }, `${this.what}: the store answers again`);
    this.since = null;
    this.failures = 0;
  }
}
