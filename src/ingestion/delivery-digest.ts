/**
 * A delivery body read and digested: parsed, split into items, every resource checked against
 * the FHIR R4 schema, and each item reduced to what processing needs of it (its key, status,
 * patient, search record, and the resource as JSON text for the events it may raise).
 *
 * Why a digest and not the parsed resources: the digest is made where the body is parsed, which
 * is a thread of its own in a serving process (modules/deliveries/delivery-reader.ts). What
 * crosses back to the serving thread must be cheap to copy: a few small fields per item and one
 * string, where the parsed resources would cost the serving thread as much to receive as the
 * parse they replace. The JSON text is what a run's payload stores anyway.
 */
import { createHash } from 'node:crypto';
import secureJson from 'secure-json-parse';
import { invalidRequest } from '../lib/errors.js';
import { mayHoldUnstorableText } from '../lib/storable-text.js';
import { checkItems } from './check-items.js';
import { parseDeliveryBody, resourcesByFullUrl, type DeliveryItem, type DeliveryItems, type DeliveryProblem, type FhirResource } from './delivery-body.js';
import type { FhirValidator } from './fhir-validate.js';
import { recordFromResource, subjectReferenceOf, type PlainRecord } from './records.js';
import { versionOf } from './resource-version.js';

/** One delivered FHIR resource (or deletion), as processing sees it. */
export interface ResourceFacts {
  kind: 'resource';
  /** position in the delivery, shared with problems */
  index: number;
  resourceType: string;
  id: string;
  deleted: boolean;
  /** `status` when it is a string of at most 64 characters; null otherwise and for deletions */
  status: string | null;
  /** the Patient it belongs to (`urn:uuid:` references resolved within the delivery); null for deletions */
  patientId: string | null;
  /** its search record (Patient, Practitioner); null for other types and deletions */
  record: PlainRecord | null;
  /** the resource as delivered, as JSON text (`{resourceType, id}` for a deletion) */
  json: string;
  /** a hash of `json`, to know the resource sent again unchanged; null for deletions */
  contentHash: string | null;
  /** `meta.lastUpdated` as a UTC instant, to know a late older version (resource-version.ts); for a deletion its history entry's `response.lastModified`; null when absent */
  lastUpdated: string | null;
  /** `meta.versionId`; for a deletion the version in its history entry's `response.etag`; null when absent */
  versionId: string | null;
}

export type DigestItem = ResourceFacts | { kind: 'record'; record: PlainRecord; index: number };

export interface DeliveryDigest {
  items: DigestItem[];
  /** entries refused by the shape check or the FHIR schema, in index order */
  problems: DeliveryProblem[];
}

const MAX_STATUS_LENGTH = 64;

/** The body as JSON; `__proto__` and `constructor.prototype` keys are refused, never merged. */
function parseJsonBody(text: string): unknown {
  if (text.trim() === '') throw invalidRequest('delivery body is empty; send a JSON object');
  try {
    return secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch {
    throw invalidRequest('delivery body is not valid JSON (or holds a __proto__ or constructor.prototype key)');
  }
}

/**
 * A body as items, or an `invalid_request` error saying why its shape is refused. `stored`: the
 * body passed these checks when it was received, so plain JSON.parse is enough (the scan for
 * prototype keys would be a second pass over megabytes; the look for text no store can keep is a
 * regular expression over the text, and walks the items only when it finds an escape).
 */
export function readDeliveryBody(text: string, stored = false): DeliveryItems {
  // The text check is made again on a stored body: its problems are the processing's to report.
  return parseDeliveryBody(stored ? JSON.parse(text) : parseJsonBody(text), { checkText: mayHoldUnstorableText(text) });
}

/** Every resource checked against the R4 schema; the ones that pass become facts. */
export function digestDelivery(parsed: DeliveryItems, validator: FhirValidator): DeliveryDigest {
  const checked = checkItems(parsed, validator);
  const byFullUrl = resourcesByFullUrl(checked.items);
  return { items: checked.items.map((item) => (item.kind === 'record' ? item : factsOf(item, byFullUrl))), problems: checked.problems };
}

function factsOf(item: Extract<DeliveryItem, { kind: 'resource' }>, byFullUrl: ReadonlyMap<string, FhirResource>): ResourceFacts {
  const { resource, index, deleted } = item;
  const { resourceType, id } = resource;
  if (deleted) {
    const json = JSON.stringify({ resourceType, id });
    return { kind: 'resource', index, resourceType, id, deleted, status: null, patientId: null, record: null, json, contentHash: null, ...versionOf(resource) };
  }
  const { status } = resource;
  // Safe to stringify: validation refuses resources nested past ~900 levels, well before
  // JSON.stringify would run out of stack (~2,000 on a default Node stack).
  const json = JSON.stringify(resource);
  return {
    kind: 'resource',
    index,
    resourceType,
    id,
    deleted,
    status: typeof status === 'string' && status.length <= MAX_STATUS_LENGTH ? status : null,
    patientId: subjectReferenceOf(resource, byFullUrl),
    record: recordFromResource(resource),
    json,
    contentHash: contentHashOf(json),
    ...versionOf(resource),
  };
}

/**
 * 128 bits of the resource's SHA-256, enough to tell a resource sent again unchanged from one
 * that changed (about 1 µs a Synthea resource, on the reader's thread). The text is the one the
 * sender's JSON gives, so the same resource with its elements in another order counts as changed.
 */
function contentHashOf(json: string): string {
  return createHash('sha256').update(json).digest('base64url').slice(0, 22);
}
