/**
 * What one delivery changes, worked out in memory before anything is written: the events it
 * raises, the last state of every resource it touches, and the search records it creates,
 * changes or removes. Pure: the stored states come in, plain values go out, so the processor
 * writes the outcome in one transaction and tests check it without a database.
 *
 * Items are taken in delivery order, each seeing the state the ones before it left, so a bundle
 * that creates and then updates an Encounter raises `created` then `updated`, and a status event
 * fires only when the status differs from the one before (a repeated update raises none). A
 * resource delivered again exactly as it was stored raises no event at all; an older version
 * than the one stored (resource-version.ts) is not applied and is listed as skipped; a deletion
 * of a resource not stored (never delivered, or deleted already) raises no event.
 */
import type { DigestItem } from './delivery-digest.js';
import type { DeliveryProblem } from './delivery-body.js';
import { eventsFor } from './events.js';
import { compareVersions, isOlderVersion, type ResourceVersion } from './resource-version.js';
import type { PlainRecord, RecordType } from './records.js';

/** What the service remembers of a resource between deliveries. */
export interface ResourceState {
  status: string | null;
  /** id of the Patient resource it belongs to, or null */
  patientId: string | null;
  /** tags the resource gave its search record (Patient, Practitioner); null for other types */
  sourceTags: string[] | null;
  /** hash of the resource as last delivered; null for plain records and states stored before it was kept */
  contentHash: string | null;
  /** `meta.lastUpdated` of the version stored (ISO instant); null when it had none, for plain records and states stored before it was kept */
  lastUpdated: string | null;
  /** `meta.versionId` of the version stored; null likewise */
  versionId: string | null;
  /**
   * A tombstone: the resource was deleted, and only the version deleted is kept (the other
   * fields are null), so a late delivery of it or of an older version is not stored again.
   * Such a state counts as no state at all for everything else (events, search, subjects).
   */
  deleted?: true;
}

export interface RaisedEvent {
  /** position of the item in the delivery */
  index: number;
  event: string;
  /** the resource as delivered, as JSON text; for a deletion only `{resourceType, id}` */
  resourceJson: string;
  /** the Patient id the resource belongs to (the run's subject), or null */
  patientId: string | null;
}

export interface RecordChange {
  record: PlainRecord;
  /**
   * The tags the previous delivery of this record gave it (less those a pathway has adopted since),
   * null when it was never delivered. An update removes those it no longer carries and keeps every
   * other tag (set by pathways); with null, it removes none.
   */
  previousSourceTags: string[] | null;
}

export interface DeliveryChanges {
  events: RaisedEvent[];
  /** final state per resource key; a tombstone when the delivery deleted it, null when it deleted what was never stored (no version to keep) */
  states: Map<string, ResourceState | null>;
  /** final change per record key (`recordKey`); null when the record is to be removed */
  records: Map<string, RecordChange | null>;
  /** Patient ids that resources point at: records must exist for them to be subjects */
  referencedPatients: Set<string>;
  /** Patient ids of deleted resources: subjects if their record still exists, never made anew */
  formerPatients: Set<string>;
  /** items not applied because a newer version of their resource is stored, in index order */
  stale: DeliveryProblem[];
}

export const stateKey = (resourceType: string, id: string): string => `${resourceType}\u0000${id}`;
export const recordKey = (resourceType: RecordType, extId: string): string => `${resourceType}\u0000${extId}`;

export function splitKey(key: string): [string, string] {
  const at = key.indexOf('\u0000');
  return [key.slice(0, at), key.slice(at + 1)];
}

const isRecordType = (type: string): type is RecordType => type === 'Patient' || type === 'Practitioner';

/** The state keys a delivery's items touch, for reading their stored states first. */
export function touchedStateKeys(items: readonly DigestItem[]): Set<string> {
  const keys = new Set<string>();
  for (const item of items) {
    if (item.kind === 'resource') {
      keys.add(stateKey(item.resourceType, item.id));
      // Whether the Patient it belongs to was deleted (a tombstone: no stand-in record for it).
      if (item.patientId !== null) keys.add(stateKey('Patient', item.patientId));
    } else keys.add(stateKey(item.record.resourceType, item.record.extId));
  }
  return keys;
}

/**
 * Walks the digested (already validated) items over the stored states. `stored` holds the
 * states of the touched keys that exist.
 */
export function changesOf(items: readonly DigestItem[], stored: ReadonlyMap<string, ResourceState>): DeliveryChanges {
  const states = new Map<string, ResourceState | null>();
  const records = new Map<string, RecordChange | null>();
  const events: RaisedEvent[] = [];
  const referencedPatients = new Set<string>();
  const formerPatients = new Set<string>();
  const stale: DeliveryProblem[] = [];
  const current = (key: string): ResourceState | null => (states.has(key) ? states.get(key)! : stored.get(key) ?? null);
  const storedTags = (key: string): string[] | null => stored.get(key)?.sourceTags ?? null;

  for (const item of items) {
    if (item.kind === 'record') {
      const { record } = item;
      const key = stateKey(record.resourceType, record.extId);
      // Plain records keep search current; they are not FHIR resources and raise no events.
      states.set(key, {
        status: null,
        patientId: record.resourceType === 'Patient' ? record.extId : null,
        sourceTags: record.tags,
        contentHash: null,
        lastUpdated: null,
        versionId: null,
      });
      records.set(recordKey(record.resourceType, record.extId), { record, previousSourceTags: storedTags(key) });
      continue;
    }

    const type = item.resourceType;
    const key = stateKey(type, item.id);
    const known = current(key);
    // A deleted resource's tombstone orders versions, and is otherwise not there.
    const before = known?.deleted ? null : known;
    const raised = { resourceType: type, status: item.status };

    // A late delivery of an older version than the one stored changes nothing: applied, it put
    // back older data and raised older statuses again; an older deletion (a history replayed)
    // deleted a newer version (resource-version.ts). After a deletion, the version deleted and
    // older ones are late too: stored again, a resource deleted in error came back.
    if (known?.deleted && !item.deleted && isLateAfterDeletion(item, known)) {
      stale.push({ index: item.index, message: `${type} not applied: it was deleted, and this is the version deleted or an older one (its meta.lastUpdated or meta.versionId)` });
      continue;
    }
    if (before !== null && isOlderVersion(item, before)) {
      const what = item.deleted ? `${type} deletion not applied: a newer version of it is stored (its response.lastModified or etag is older)` : `${type} not applied: a newer version of it is stored (its meta.lastUpdated or meta.versionId is older)`;
      stale.push({ index: item.index, message: what });
      continue;
    }
    if (item.deleted) {
      // A deleted Patient's record leaves search with it, so its own event has no subject.
      const patientId = type === 'Patient' ? null : before?.patientId ?? null;
      if (patientId !== null) formerPatients.add(patientId);
      // Deleting what is not stored (deleted already, or never delivered: a DELETE sent again,
      // a feed connected after the resource was made) deletes nothing: no event, whose run would
      // have no patient and no resource to go by.
      if (before !== null) {
        for (const event of eventsFor(raised, { existed: true, previousStatus: before.status, deleted: true })) {
          events.push({ index: item.index, event, resourceJson: item.json, patientId });
        }
      }
      states.set(key, tombstoneOf(item, known));
      if (isRecordType(type)) records.set(recordKey(type, item.id), null);
      continue;
    }

    const { patientId, record } = item;
    // A Patient deleted (its tombstone) gets no stand-in record back from a resource that names
    // it: a retried bundle made a deleted patient searchable again, a cohort's candidate.
    if (patientId !== null && !current(stateKey('Patient', patientId))?.deleted) referencedPatients.add(patientId);
    // Sent again as it was (a nightly full export, a retry under a new key): nothing happened to
    // it, so no event; search is kept as it is written below.
    const unchanged = before !== null && before.contentHash !== null && before.contentHash === item.contentHash && before.patientId === patientId;
    if (!unchanged) {
      for (const event of eventsFor(raised, { existed: before !== null, previousStatus: before?.status, deleted: false })) {
        events.push({ index: item.index, event, resourceJson: item.json, patientId });
      }
    }
    states.set(key, {
      status: item.status,
      patientId,
      sourceTags: record ? record.tags : null,
      contentHash: item.contentHash,
      lastUpdated: item.lastUpdated,
      versionId: item.versionId,
    });
    if (record) records.set(recordKey(record.resourceType, record.extId), { record, previousSourceTags: storedTags(key) });
  }
  return { events, states, records, referencedPatients, formerPatients, stale };
}

/** The version deleted, or an older one: a version that cannot be ordered against it is applied, as anywhere else. */
function isLateAfterDeletion(item: ResourceVersion, tombstone: ResourceState): boolean {
  const order = compareVersions(item, tombstone);
  return order === -1 || order === 0;
}

/**
 * What a deletion leaves: a tombstone with the newer of the DELETE's own version (a history
 * bundle's response gives one) and the one known (the stored resource's, or an earlier
 * deletion's). With no version on either side it is still kept for a resource that was stored:
 * it orders nothing (what comes next is applied), but a deleted Patient gets no stand-in record
 * from a resource naming it later, in another delivery or in a later part of the same one (a
 * verification round). A versionless DELETE of what was never stored leaves nothing (no row
 * for every stray DELETE).
 */
function tombstoneOf(deletion: ResourceVersion, known: ResourceState | null): ResourceState | null {
  if (known === null && !hasVersion(deletion)) return null;
  const kept = known !== null && hasVersion(known) ? known : null;
  let version: ResourceVersion;
  if (!hasVersion(deletion) || kept === null) version = kept ?? deletion;
  else {
    const order = compareVersions(deletion, kept);
    // Versions that cannot be ordered (one gives only an instant, the other only a versionId)
    // both describe the version deleted: both are kept, so neither is taken for a newer one.
    version = order === 1 ? deletion : order === null ? { lastUpdated: deletion.lastUpdated ?? kept.lastUpdated, versionId: deletion.versionId ?? kept.versionId } : kept;
  }
  return { status: null, patientId: null, sourceTags: null, contentHash: null, lastUpdated: version.lastUpdated, versionId: version.versionId, deleted: true };
}

function hasVersion(version: ResourceVersion): boolean {
  return version.lastUpdated !== null || version.versionId !== null;
}
