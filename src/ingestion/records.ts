import type { FhirResource } from './delivery-body.js';

/**
 * Search records (DESIGN §7, §8): what a delivered Patient or Practitioner becomes in search,
 * and which patient a delivered resource belongs to (the subject of the runs it starts).
 */

export type RecordType = 'Patient' | 'Practitioner';

export interface PlainRecord {
  resourceType: RecordType;
  extId: string;
  name: string;
  tags: string[];
}

export const TAG_SLUG = /^[a-z0-9][a-z0-9._:-]{0,63}$/;

// Bounds for plain records sent as JSON, so one delivery cannot store unbounded text.
const MAX_EXT_ID = 128;
const MAX_NAME = 512;
/** The most tags a record may carry from its sender (a plain record's `tags`, a resource's `meta.tag`). */
export const MAX_TAGS = 100;
const RECORD_FIELDS = new Set(['resourceType', 'extId', 'name', 'tags']);
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

const isRecordType = (value: unknown): value is RecordType => value === 'Patient' || value === 'Practitioner';
const nonEmptyString = (value: unknown): value is string => typeof value === 'string' && value.trim() !== '';

/** A Patient or Practitioner as a search record; null for every other resource type. */
export function recordFromResource(resource: FhirResource): PlainRecord | null {
  if (!isRecordType(resource.resourceType) || !nonEmptyString(resource.id)) return null;
  return {
    resourceType: resource.resourceType,
    extId: resource.id,
    name: firstHumanName(resource.name) || resource.id,
    tags: tagsFromMeta(resource.meta),
  };
}

/** `text` of the first HumanName, else its given names and family joined by spaces. */
function firstHumanName(names: unknown): string {
  if (!Array.isArray(names)) return '';
  const first: unknown = names.find((n) => n !== null && typeof n === 'object');
  if (!first) return '';
  const { text, given, family } = first as { text?: unknown; given?: unknown; family?: unknown };
  if (nonEmptyString(text)) return collapseSpaces(text);
  const parts = [...(Array.isArray(given) ? given : []), family].filter(nonEmptyString);
  return collapseSpaces(parts.join(' '));
}

const collapseSpaces = (text: string): string => text.trim().replace(/\s+/g, ' ');

/** The search tags a resource's `meta.tag` gives: each code slugged, the ones left distinct. */
export function tagsFromMeta(meta: unknown): string[] {
  const tags = (meta as { tag?: unknown } | undefined)?.tag;
  if (!Array.isArray(tags)) return [];
  const slugs = tags
    .map((tag: unknown) => (tag as { code?: unknown } | null)?.code)
    .filter((code): code is string => typeof code === 'string')
    .map(slugTag)
    .filter((slug): slug is string => slug !== null);
  return [...new Set(slugs)];
}

/**
 * A FHIR tag code as a search tag: accents dropped, lower case, runs of other characters as one
 * '-', separators trimmed from both ends. Null when nothing is left, and when the slug could not
 * say what the code says: a letter or digit outside a–z and 0–9 once accents are dropped
 * (`糖尿病 type2` and `高血压 type2` both became `type2`, two conditions one tag), or more than 64
 * characters (cut, two long codes became one). A code not taken is better than a tag that
 * matches the wrong patients. A few letters are written out as their usual Latin spelling
 * (`Straße` → `strasse`).
 */
export function slugTag(code: string): string | null {
  const lower = code
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[ßæœøłđı]/g, (letter) => SPELLED_OUT[letter]);
  if (LETTER_OR_DIGIT_BEYOND_ASCII.test(lower)) return null;
  const slug = lower
    .replace(/[^a-z0-9._:-]+/g, '-')
    .replace(/^[._:-]+/, '')
    .replace(/[._:-]+$/, '');
  return TAG_SLUG.test(slug) ? slug : null;
}

const SPELLED_OUT: Readonly<Record<string, string>> = { ß: 'ss', æ: 'ae', œ: 'oe', ø: 'o', ł: 'l', đ: 'd', ı: 'i' };
const LETTER_OR_DIGIT_BEYOND_ASCII = /(?![a-z0-9])[\p{L}\p{N}]/u;

/**
 * Checks a plain record from a delivery body. Returns the record, or the problem with it;
 * problems name fields, never their values.
 */
export function checkPlainRecord(value: unknown): { record: PlainRecord } | { problem: string } {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { problem: 'a record must be a JSON object' };
  const fields = value as Record<string, unknown>;
  const unknown = Object.keys(fields).find((key) => !RECORD_FIELDS.has(key));
  if (unknown !== undefined) {
    return { problem: `unknown record field ${FIELD_NAME.test(unknown) ? unknown : '(unnamed)'}; allowed: resourceType, extId, name, tags` };
  }
  const { resourceType, extId, name, tags } = fields;
  if (!isRecordType(resourceType)) return { problem: 'record resourceType must be Patient or Practitioner' };
  if (!nonEmptyString(extId) || extId.length > MAX_EXT_ID || /\p{Cc}/u.test(extId)) {
    return { problem: `record extId must be a non-empty string of at most ${MAX_EXT_ID} characters without control characters` };
  }
  if (name !== undefined && (typeof name !== 'string' || name.length > MAX_NAME)) {
    return { problem: `record name must be a string of at most ${MAX_NAME} characters` };
  }
  if (tags !== undefined && (!Array.isArray(tags) || tags.length > MAX_TAGS)) {
    return { problem: `record tags must be an array of at most ${MAX_TAGS} tags` };
  }
  const tagList: unknown[] = tags ?? [];
  const badTag = tagList.findIndex((tag) => typeof tag !== 'string' || !TAG_SLUG.test(tag));
  if (badTag >= 0) return { problem: `record tags[${badTag}] must match ${TAG_SLUG.source}` };
  const cleanName = collapseSpaces(name ?? '');
  return {
    record: { resourceType, extId, name: cleanName || extId, tags: [...new Set(tagList as string[])] },
  };
}

// The elements that point at the patient a resource is about, in the order they are tried;
// then, for resources that name their patient among participants (Appointment), each
// `participant[].actor` in turn, where only a Patient counts.
export const SUBJECT_ELEMENTS = ['subject', 'patient', 'beneficiary', 'individual'] as const;
const PATIENT_REFERENCE = /(?:^|\/)Patient\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;

/**
 * The id of the Patient a resource belongs to, or null. A Patient belongs to itself. References
 * are `Patient/<id>` (relative or absolute) or, inside a Bundle, a fullUrl such as
 * `urn:uuid:<id>` looked up in `byFullUrl` (fullUrl → resource of the same delivery).
 */
export function subjectReferenceOf(
  resource: FhirResource,
  byFullUrl?: ReadonlyMap<string, FhirResource>,
): string | null {
  if (resource.resourceType === 'Patient') return nonEmptyString(resource.id) ? resource.id : null;
  for (const reference of patientReferenceCandidates(resource)) {
    const target = byFullUrl?.get(reference);
    if (target) {
      if (target.resourceType === 'Patient' && nonEmptyString(target.id)) return target.id;
      continue;
    }
    const id = PATIENT_REFERENCE.exec(reference)?.[1];
    if (id) return id;
  }
  return null;
}

function* patientReferenceCandidates(resource: FhirResource): Generator<string> {
  for (const element of SUBJECT_ELEMENTS) {
    const reference = (resource[element] as { reference?: unknown } | undefined)?.reference;
    if (typeof reference === 'string') yield reference;
  }
  const participants = resource.participant;
  if (!Array.isArray(participants)) return;
  for (const participant of participants) {
    const reference = (participant as { actor?: { reference?: unknown } } | null)?.actor?.reference;
    if (typeof reference === 'string') yield reference;
  }
}
