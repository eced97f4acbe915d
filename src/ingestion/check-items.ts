/**
 * Splits a parsed delivery into the items that go on and the problems to report: every resource
 * is checked against the FHIR R4 schema of its type, a deletion needs a known type. A problem
 * keeps the item's index and a message that names paths and rules, never values.
 */
import type { DeliveryItems } from './delivery-body.js';
import type { FhirValidator } from './fhir-validate.js';

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
    if (result.valid) out.items.push(item);
    else out.problems.push({ index: item.index, message: result.message });
  }
  out.problems.sort((a, b) => a.index - b.index);
  return out;
}
