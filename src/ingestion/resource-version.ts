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
  /** `meta.lastUpdated` as an ISO 8601 UTC instant (ms), or null when absent or not an instant */
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
  const at = typeof lastUpdated === 'string' ? Date.parse(lastUpdated) : Number.NaN;
  return {
    lastUpdated: Number.isNaN(at) ? null : new Date(at).toISOString(),
    versionId: typeof versionId === 'string' && versionId.length <= 64 ? versionId : null,
  };
}

/**
 * Whether `incoming` is an older version than `stored`: its `lastUpdated` earlier, or, with
 * the same or no instants to compare, its whole-number `versionId` lower. The same version, a
 * later one, or one that cannot be ordered is not older.
 */
export function isOlderVersion(incoming: ResourceVersion, stored: ResourceVersion): boolean {
  if (incoming.lastUpdated !== null && stored.lastUpdated !== null && incoming.lastUpdated !== stored.lastUpdated) {
    return incoming.lastUpdated < stored.lastUpdated;
  }
  const a = incoming.versionId;
  const b = stored.versionId;
  if (a === null || b === null || !WHOLE_NUMBER.test(a) || !WHOLE_NUMBER.test(b)) return false;
  return Number(a) < Number(b);
}
