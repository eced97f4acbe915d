/**
 * Retry timing for outbound calls: exponential backoff with full jitter (each delay drawn
 * uniformly from zero to the exponential ceiling), so many runs failing together do not retry
 * together. Pure functions; the random source is passed in.
 */
export interface BackoffPolicy {
  /** Tries in all, the first included. */
  attempts: number;
  baseMs: number;
  maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { attempts: 4, baseMs: 250, maxMs: 5_000 };

/** Delay before try `retry` + 1 (retry counts from 1). */
export function backoffDelay(retry: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** (retry - 1));
  return Math.floor(random() * ceiling);
}

/** 5xx and 429 may succeed later; other answers will not change by asking again. */
export function isRetryableStatus(status: number): boolean {
  return status === 429 || status >= 500;
}

/** A `Retry-After` in seconds or as an HTTP date, in ms from `nowMs`; null when absent or bad. */
export function retryAfterMs(header: string | undefined, nowMs: number): number | null {
  if (header === undefined || header.trim() === '') return null;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? null : Math.max(0, date - nowMs);
}
