/**
 * ISO 8601 durations that move time forward, for waits and timeouts.
 *
 * luxon reads more than ISO 8601 writes: a part may be negative (`P-1M30DT1H`), and its
 * `toMillis()` counts a month as 30 days, so "longer than zero" by that measure let a wait end
 * 23 hours before it began (a review). ISO 8601 has no negative parts; here none may be, and the
 * duration must move an instant by at least a millisecond (`P0.00000001D` does not).
 */
import { DateTime, Duration } from 'luxon';

/** Whether luxon read a part of the duration as negative, which ISO 8601 has no way to write. */
export function hasNegativePart(duration: Duration): boolean {
  return Object.values(duration.toObject()).some((part) => part < 0);
}

export function forwardDuration(text: string): Duration | undefined {
  const duration = Duration.fromISO(text);
  if (!duration.isValid || hasNegativePart(duration)) return undefined;
  // With no part negative, the duration moves every instant forward by about as much as this one;
  // past what a date can hold (P999999999Y) it moves it very far, which callers clamp.
  const moved = DateTime.fromMillis(0, { zone: 'utc' }).plus(duration);
  return !moved.isValid || Math.floor(moved.toMillis()) >= 1 ? duration : undefined;
}
