import { invalidRequest } from '../lib/errors.js';
import { checkPlainRecord, type PlainRecord } from './records.js';
import { FHIR_R4_RESOURCE_TYPES } from './events.js';
import { unstorableTextProblem } from '../lib/storable-text.js';

/**
 * A delivery body (DESIGN §7) as a flat list of items. Accepted shapes:
 *  - a FHIR R4 Bundle of any type; a Bundle inside an entry is flattened (depth 2 at most);
 *  - a single FHIR R4 resource;
 *  - the wrapper `{"resourceType": …, "bundle": <Bundle>}`;
 *  - a plain record `{"resourceType": "Patient"|"Practitioner", "extId", "name", "tags"}`,
 *    or `{"records": [...]}`.
 * A body of another shape is rejected whole (`invalid_request`); a bad entry or record inside an
 * accepted shape becomes a problem, so the rest of the delivery still counts. A body that is one
 * resource or one plain record is rejected whole when that one cannot be taken (a type FHIR R4
 * does not have, no id, a record field it does not know): a 202 that accepted nothing told the
 * sender its data was delivered.
 * Resources are not checked against the FHIR schema here: that is fhir-validate's job. With
 * `checkText`, an item holding text no store can keep (U+0000, an unpaired surrogate:
 * lib/storable-text.ts) is a problem too; PostgreSQL used to fail such a delivery after its 202.
 */

export interface FhirResource {
  resourceType: string;
  id?: string;
  [element: string]: unknown;
}

export type DeliveryItem =
  | {
      kind: 'resource';
      /** Always carries an id; for a deletion only resourceType and id. */
      resource: FhirResource & { id: string };
      deleted: boolean;
      index: number;
      fullUrl?: string;
    }
  | { kind: 'record'; record: PlainRecord; index: number };

export interface DeliveryProblem {
  index: number;
  message: string;
}

export interface DeliveryItems {
  items: DeliveryItem[];
  problems: DeliveryProblem[];
}

/** Bundles may hold Bundles (a batch-response of searchsets), but no deeper than this. */
export const MAX_BUNDLE_DEPTH = 2;

const RESOURCE_TYPE = /^[A-Z][A-Za-z]{1,63}$/;
const DELETE_URL = /(?:^|\/)([A-Z][A-Za-z]{1,63})\/([A-Za-z0-9\-.]{1,64})$/;
const HTTP_METHOD = /^(GET|HEAD|POST|PUT|PATCH)$/;
const URN_UUID = /^urn:uuid:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;

type JsonObject = Record<string, unknown>;

const isObject = (value: unknown): value is JsonObject =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

export interface ParseOptions {
  /** Look for unstorable text in every item (when the body's text has an escape that could make it). */
  checkText?: boolean;
}

/** What parsing one body carries along: its items and problems so far, and its options. */
interface Parsing extends DeliveryItems {
  checkText: boolean;
}

export function parseDeliveryBody(body: unknown, options: ParseOptions = {}): DeliveryItems {
  if (!isObject(body)) throw invalidRequest('Delivery body must be a JSON object: a FHIR R4 resource or Bundle, or plain records');
  const out: Parsing = { items: [], problems: [], checkText: options.checkText ?? false };

  if (Object.hasOwn(body, 'records') && !Object.hasOwn(body, 'resourceType')) {
    if (!Array.isArray(body.records)) throw invalidRequest('"records" must be an array of plain records');
    body.records.forEach((value, index) => addRecord(out, value, index));
    return itemsOf(out);
  }
  if (typeof body.resourceType !== 'string') {
    throw invalidRequest('Delivery body must carry a string "resourceType", or be {"records": [...]}');
  }
  if (Object.hasOwn(body, 'bundle') && !Object.hasOwn(body, 'entry')) {
    if (!isObject(body.bundle) || body.bundle.resourceType !== 'Bundle') {
      throw invalidRequest('"bundle" must be a FHIR R4 Bundle (resourceType "Bundle")');
    }
    addBundle(out, body.bundle, 1);
    return itemsOf(out);
  }
  if (Object.hasOwn(body, 'extId')) {
    addRecord(out, body, 0);
    return onlyItemTaken(out, 'The plain record');
  }
  if (!RESOURCE_TYPE.test(body.resourceType)) throw invalidRequest('"resourceType" is not a FHIR resource type name');
  if (body.resourceType === 'Bundle') {
    addBundle(out, body, 1);
    return itemsOf(out);
  }
  if (!KNOWN_TYPES.has(body.resourceType)) throw invalidRequest(`"resourceType" ${body.resourceType} is not a FHIR R4 resource type`);
  addResource(out, body as FhirResource, undefined);
  return onlyItemTaken(out, 'The resource');
}

/** The item's problem when it holds text no store can keep, named by its path in the item. */
function unstorableProblem(out: Parsing, value: unknown, what: string): string | null {
  return out.checkText ? unstorableTextProblem(value, what) : null;
}

const KNOWN_TYPES = new Set(FHIR_R4_RESOURCE_TYPES);

/** A body of one item: its problem, if it has one, refuses the body (400) instead of a 202 that accepted nothing. */
function onlyItemTaken(out: Parsing, what: string): DeliveryItems {
  if (out.problems.length > 0) throw invalidRequest(`${what} cannot be taken: ${out.problems[0].message}`);
  return itemsOf(out);
}

const itemsOf = ({ items, problems }: Parsing): DeliveryItems => ({ items, problems });

/** fullUrl → resource over a delivery's items, to resolve `urn:uuid:` references. */
export function resourcesByFullUrl(items: readonly DeliveryItem[]): Map<string, FhirResource> {
  const byFullUrl = new Map<string, FhirResource>();
  for (const item of items) {
    if (item.kind === 'resource' && !item.deleted && item.fullUrl) byFullUrl.set(item.fullUrl, item.resource);
  }
  return byFullUrl;
}

function addRecord(out: Parsing, value: unknown, index: number): void {
  const unstorable = unstorableProblem(out, value, 'record');
  if (unstorable !== null) {
    out.problems.push({ index, message: unstorable });
    return;
  }
  const checked = checkPlainRecord(value);
  if ('record' in checked) out.items.push({ kind: 'record', record: checked.record, index });
  else out.problems.push({ index, message: checked.problem });
}

function addBundle(out: Parsing, bundle: JsonObject, depth: number): void {
  const { entry } = bundle;
  if (entry === undefined) return;
  if (!Array.isArray(entry)) throw invalidRequest('Bundle.entry must be an array');
  // Where each entry's items begin: a history bundle's entries are put in the other order.
  const entryStarts: number[] = [];
  for (const value of entry) {
    entryStarts.push(out.items.length);
    const index = out.items.length + out.problems.length;
    if (!isObject(value)) {
      out.problems.push({ index, message: 'Bundle entry must be a JSON object' });
      continue;
    }
    const method = isObject(value.request) ? value.request.method : undefined;
    const fullUrl = typeof value.fullUrl === 'string' ? value.fullUrl : undefined;
    const notData = notDataEntry(value);
    if (notData !== null) out.problems.push({ index, message: notData });
    else if (method === 'DELETE') addDeletion(out, value.request as JsonObject, value.response, index);
    else if (isObject(value.resource) && value.resource.resourceType === 'Bundle') {
      if (depth >= MAX_BUNDLE_DEPTH) {
        throw invalidRequest(`Bundles nest at most ${MAX_BUNDLE_DEPTH} deep; a Bundle entry holds a Bundle at depth ${depth + 1}`);
      }
      addBundle(out, value.resource, depth + 1);
    } else if (isObject(value.resource)) addResource(out, value.resource, fullUrl);
    else if (typeof method === 'string' && HTTP_METHOD.test(method)) {
      out.problems.push({ index, message: `Bundle entry with request ${method} carries no resource` });
    } else out.problems.push({ index, message: 'Bundle entry carries no resource' });
  }
  // A history bundle lists versions newest first (FHIR R4 §3.1.0.11.3); they are applied oldest
  // first, so the newest decides what is stored (a deletion listed first stays a deletion). Its
  // entries change places, each entry's items (a Bundle inside it) keep their own order, and
  // every item keeps its place in the delivery as its index.
  if (bundle.type === 'history' && entryStarts.length > 1) {
    const ends = [...entryStarts.slice(1), out.items.length];
    const byEntry = entryStarts.map((start, n) => out.items.slice(start, ends[n]));
    out.items.splice(entryStarts[0], out.items.length - entryStarts[0], ...byEntry.reverse().flat());
  }
}

/**
 * Entries a Bundle carries that are not data about patients, or null: a searchset's outcome (an
 * OperationOutcome about the search itself) and an operation call in a transaction (`POST
 * ValueSet/$lookup` with its Parameters). Applied, they raised `OperationOutcome.created` and
 * `Parameters.created` (a feed review); they are listed as skipped instead. So is a PATCH.
 */
function notDataEntry(entry: JsonObject): string | null {
  if (isObject(entry.search) && entry.search.mode === 'outcome') return 'search outcome entry (about the search, not data): not applied';
  // A PATCH entry carries the patch (a Parameters or a Binary), not the resource: applied, it
  // raised `Parameters.created`, and the patched resource was never seen.
  if (isObject(entry.request) && entry.request.method === 'PATCH') return 'PATCH entry (it carries a patch, not the resource): not applied; send the whole resource with PUT';
  const url = isObject(entry.request) && typeof entry.request.url === 'string' ? entry.request.url : '';
  if (/(?:^|\/)\$[A-Za-z]/.test(url)) return 'operation call (request.url names a $operation), not data: not applied';
  return null;
}

/**
 * A DELETE entry as an item: the resource's type and id, and, in a history bundle, the version
 * the deletion made (`response.lastModified`, `response.etag` `W/"<versionId>"`) as its `meta`,
 * so a late replay of an older deletion is told from a newer one (resource-version.ts).
 */
function addDeletion(out: Parsing, request: JsonObject, response: unknown, index: number): void {
  const url = typeof request.url === 'string' ? request.url : '';
  if (url.includes('?')) {
    out.problems.push({ index, message: 'conditional DELETE (request.url with a search) is not supported' });
    return;
  }
  const match = DELETE_URL.exec(url);
  if (!match) {
    out.problems.push({ index, message: 'DELETE entry request.url must be <ResourceType>/<id>' });
    return;
  }
  out.items.push({ kind: 'resource', resource: { resourceType: match[1], id: match[2], ...deletionVersion(response) }, deleted: true, index });
}

const WEAK_ETAG = /^W\/"([^"]{1,64})"$/;

function deletionVersion(response: unknown): { meta?: { lastUpdated?: string; versionId?: string } } {
  if (!isObject(response)) return {};
  const lastUpdated = typeof response.lastModified === 'string' ? response.lastModified : undefined;
  const versionId = typeof response.etag === 'string' ? WEAK_ETAG.exec(response.etag)?.[1] : undefined;
  if (lastUpdated === undefined && versionId === undefined) return {};
  return { meta: { ...(lastUpdated !== undefined && { lastUpdated }), ...(versionId !== undefined && { versionId }) } };
}

function addResource(out: Parsing, resource: JsonObject, fullUrl: string | undefined): void {
  const index = out.items.length + out.problems.length;
  const unstorable = unstorableProblem(out, resource, 'resource');
  if (unstorable !== null) {
    out.problems.push({ index, message: unstorable });
    return;
  }
  const { resourceType, id } = resource;
  if (typeof resourceType !== 'string' || !RESOURCE_TYPE.test(resourceType)) {
    out.problems.push({ index, message: 'resource has no valid resourceType' });
    return;
  }
  if (typeof id === 'string' && id !== '') {
    out.items.push({ kind: 'resource', resource: resource as FhirResource & { id: string }, deleted: false, index, ...(fullUrl && { fullUrl }) });
    return;
  }
  // A transaction may POST a resource without an id under a `urn:uuid:` fullUrl. Taking that
  // uuid as the id keeps references to it resolvable and a redelivery idempotent; the body
  // itself is left untouched.
  const uuid = fullUrl ? URN_UUID.exec(fullUrl)?.[1] : undefined;
  if (uuid) {
    out.items.push({ kind: 'resource', resource: { ...resource, resourceType, id: uuid.toLowerCase() }, deleted: false, index, fullUrl });
    return;
  }
  out.problems.push({ index, message: `${resourceType} has no id (and no urn:uuid fullUrl to take one from)` });
}
