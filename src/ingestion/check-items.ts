/**
 * Splits a parsed delivery into the items that go on and the problems to report: every resource
 * is checked against the FHIR R4 schema of its type, a deletion needs a known type. A problem
 * keeps the item's index and a message that names paths and rules, never values.
 */
import type { DeliveryItems } from './delivery-body.js';
import type { FhirValidator } from './fhir-validate.js';
import { MAX_TAGS, tagsFromMeta } from './records.js';

const SAFE_TYPE = /^[A-Za-z]{1,64}$/;

export function checkItems(parsed: DeliveryItems, validator: FhirValidator): DeliveryItems {
  const out: DeliveryItems = { items: [], problems: [...parsed.problems] };
  for (const item of parsed.items) {
    if (item.kind === 'record') {
      out.items.push(item);
      continue;
    }
    const type = item.resource.resourceType;
    if (item.deleted) {
      if (validator.isKnownType(type)) out.items.push(item);
      else out.problems.push({ index: item.index, message: `unknown FHIR resource type ${SAFE_TYPE.test(type) ? type : '(not a valid type name)'}` });
      continue;
    }
    const result = validator.validate(item.resource);
    const tags = result.valid ? tooManyTags(item.resource) : null;
    if (!result.valid) out.problems.push({ index: item.index, message: result.message });
    else if (tags !== null) out.problems.push({ index: item.index, message: tags });
    else out.items.push(item);
  }
  out.problems.sort((a, b) => a.index - b.index);
  return out;
}

/**
 * A Patient's or Practitioner's `meta.tag` becomes its search tags; past MAX_TAGS it is refused,
 * as a plain record's `tags` are: half a million tags in one Patient held the SQLite process for
 * half a minute while they were written (a security review).
 */
function tooManyTags(resource: { resourceType: string; meta?: unknown }): string | null {
  if (resource.resourceType !== 'Patient' && resource.resourceType !== 'Practitioner') return null;
  const written = (resource.meta as { tag?: unknown } | undefined)?.tag;
  if (!Array.isArray(written) || written.length <= MAX_TAGS) return null;
  // Counted as search tags: codes that slug to the same tag are one.
  const tags = tagsFromMeta(resource.meta).length;
  if (tags <= MAX_TAGS) return null;
  return `meta.tag gives ${tags} tags; a ${resource.resourceType} may carry at most ${MAX_TAGS} (they become its search tags)`;
}
