/**
 * Which version of a resource a delivery carries, to tell a late delivery of an older version
 * from a newer one. Feeds do not arrive in order: a sender retries a failed delivery after the
 * next one went through, two interfaces of one EHR send in parallel, a history is replayed. An
 * older version applied after a newer one put back the older name and tags, and raised the
 * older status again (`Encounter.in-progress` after `Encounter.finished`, and `finished` once
 * more with the next delivery: a second run of every pathway it starts).
 *
 * The order comes from the resource itself: `meta.lastUpdated` (an instant the server that holds
 * the resource sets with each version), and where both versions carry no comparable instant,
 * `meta.versionId` when both are whole numbers (what FHIR servers use). A resource without
 * either is taken as it comes: there is nothing to order it by.
 */

export interface ResourceVersion {
  /**
   * `meta.lastUpdated` as a UTC instant with nine fractional digits (`2024-05-01T06:00:00.123456700Z`),
   * so that instants compare as text to the digit they were sent with; null when absent or not an instant
   */
  lastUpdated: string | null;
  /** `meta.versionId` as delivered, or null */
  versionId: string | null;
}

export const NO_VERSION: ResourceVersion = { lastUpdated: null, versionId: null };

const WHOLE_NUMBER = /^\d{1,15}$/;

export function versionOf(resource: object): ResourceVersion {
  const meta = (resource as { meta?: unknown }).meta;
  if (meta === null || typeof meta !== 'object') return NO_VERSION;
  const { lastUpdated, versionId } = meta as { lastUpdated?: unknown; versionId?: unknown };
  return {
    lastUpdated: typeof lastUpdated === 'string' ? utcInstant(lastUpdated) : null,
    versionId: typeof versionId === 'string' && versionId.length <= 64 ? versionId : null,
  };
}

const INSTANT = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/;

/**
 * A FHIR instant in UTC with nine fractional digits, or null. JavaScript dates keep
 * milliseconds: `.123456` and `.1234` were one instant, and the older of two versions a server
 * stamped to the microsecond (some send seven digits) was applied over the newer. A leap second
 * (`23:59:60`, which FHIR allows) is the last instant of the second before it.
 */
export function utcInstant(text: string): string | null {
  const parts = INSTANT.exec(text);
  if (!parts) return null;
  const [, minute, second, fraction = '', zone] = parts;
  const leap = second === '60';
  const at = Date.parse(`${minute}:${leap ? '59' : second}${zone}`);
  if (Number.isNaN(at)) return null;
  const digits = leap ? '999999999' : fraction.padEnd(9, '0');
  return `${new Date(at).toISOString().slice(0, 19)}.${digits}Z`;
}

/**
 * Whether `incoming` is an older version than `stored`: its `lastUpdated` earlier, or, with
 * the same or no instants to compare, its whole-number `versionId` lower. The same version, a
 * later one, or one that cannot be ordered is not older.
 */
export function isOlderVersion(incoming: ResourceVersion, stored: ResourceVersion): boolean {
  return compareVersions(incoming, stored) === -1;
}

/**
 * -1, 0 or 1 as `a` is an older, the same or a newer version than `b`: by `lastUpdated` when
 * both have one and they differ, else by whole-number `versionId`s, else the same when both
 * `lastUpdated` are there (and equal); null when they cannot be ordered.
 */
export function compareVersions(a: ResourceVersion, b: ResourceVersion): -1 | 0 | 1 | null {
  if (a.lastUpdated !== null && b.lastUpdated !== null && a.lastUpdated !== b.lastUpdated) return a.lastUpdated < b.lastUpdated ? -1 : 1;
  const [x, y] = [a.versionId, b.versionId];
  if (x !== null && y !== null && WHOLE_NUMBER.test(x) && WHOLE_NUMBER.test(y)) return Math.sign(Number(x) - Number(y)) as -1 | 0 | 1;
  return a.lastUpdated !== null && a.lastUpdated === b.lastUpdated ? 0 : null;
}

