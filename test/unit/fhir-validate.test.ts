import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseDeliveryBody, type FhirResource } from '../../src/ingestion/delivery-body.js';
import { createFhirValidator, type FhirValidator } from '../../src/ingestion/fhir-validate.js';
import { SYNTHEA_FIXTURES } from '../helpers/shared-files.js';
import { jsonNestsDeeperThan, valueNestsDeeperThan } from '../../src/lib/json-depth.js';

const EXAMPLES = join(process.cwd(), 'node_modules/hl7.fhir.r4.examples');
const SYNTHEA = SYNTHEA_FIXTURES;

const example = (file: string): FhirResource => JSON.parse(readFileSync(join(EXAMPLES, file), 'utf8')) as FhirResource;

// One validator for the file: its first compile builds the shared data-type graph (seconds).
let validator: FhirValidator;
beforeAll(() => {
  validator = createFhirValidator();
  expect(validator.validate(example('Patient-example.json'))).toEqual({ valid: true });
});

describe('createFhirValidator: valid HL7 examples', () => {
  it.each([
    'Patient-example.json',
    'Practitioner-example.json',
    'Encounter-example.json',
    'Encounter-f001.json',
    'Observation-example.json',
    'Observation-blood-pressure.json',
    'Appointment-example.json',
    'MedicationRequest-medrx0301.json',
    'Immunization-example.json',
    'Task-example1.json',
    'CarePlan-example.json',
    'ServiceRequest-example.json',
    'Bundle-bundle-example.json',
    'Bundle-bundle-transaction.json',
  ])('%s is valid', (file) => {
    expect(validator.validate(example(file))).toEqual({ valid: true });
  });

  it('validates every resource of the transaction example once parsed', () => {
    for (const item of parseDeliveryBody(example('Bundle-bundle-transaction.json')).items) {
      if (item.kind === 'resource' && !item.deleted) expect(validator.validate(item.resource)).toEqual({ valid: true });
    }
  });
});

describe('createFhirValidator: invalid resources', () => {
  const patient = (fields: Record<string, unknown>) => ({ ...example('Patient-example.json'), ...fields });

  it.each([
    ['a wrong type', patient({ active: 'yes' }), '/active: must be boolean (type)'],
    ['a wrong type deep inside', patient({ name: [{ given: 'Peter' }] }), '/name/0/given: must be array (type)'],
    ['an unknown element', patient({ favouriteColour: 'blue' }), '/favouriteColour: is not an element of this type (additionalProperties)'],
    ['a bad date', patient({ birthDate: '1974-13-45' }), '/birthDate: must be a valid FHIR date (pattern)'],
    ['a date-time in a date', patient({ birthDate: '1974-12-25T10:00:00Z' }), '/birthDate: must be a valid FHIR date (pattern)'],
    ['a code outside its value set', patient({ gender: 'robot' }), '/gender: must be one of male, female, other, unknown (enum)'],
    ['a code deep inside', patient({ name: [{ use: 'nick' }] }), '/name/0/use: must be one of usual, official, temp, nickname, anonymous, old, maiden (enum)'],
    ['an empty string', patient({ name: [{ family: '' }] }), '/name/0/family: must be a valid FHIR string (pattern)'],
    ['a bad id', patient({ id: 'has spaces' }), '/id: must be a valid FHIR id (pattern)'],
    // The official schema never says its complex types are objects: these passed.
    ['a string for a complex type', patient({ maritalStatus: 'married' }), '/maritalStatus: must be object (type)'],
    ['a string for a complex type deep inside', patient({ contact: [{ name: 'Jane' }] }), '/contact/0/name: must be object (type)'],
    ['a number for a Reference', patient({ managingOrganization: 7 }), '/managingOrganization: must be object (type)'],
    ['a list for a complex type', patient({ maritalStatus: [{ text: 'married' }] }), '/maritalStatus: must be object (type)'],
  ])('reports %s with its path and rule', (_case, resource, message) => {
    expect(validator.validate(resource)).toEqual({ valid: false, message });
  });

  it('reports a missing required element', () => {
    const { class: _class, ...encounter } = example('Encounter-example.json');
    expect(validator.validate(encounter)).toEqual({ valid: false, message: '/class: is required (required)' });
  });

  it('checks contained resources against their own type', () => {
    const contained = (resource: object) => ({ ...example('Encounter-example.json'), contained: [resource] });
    expect(validator.validate(contained({ resourceType: 'Patient', id: 'p', birthDate: 'soon' }))).toEqual({
      valid: false,
      message: '/contained/0/birthDate: must be a valid FHIR date (pattern)',
    });
    expect(validator.validate(contained({ resourceType: 'Spaceship', id: 's' }))).toEqual({
      valid: false,
      message: '/contained/0: resourceType is not a known FHIR R4 resource type (discriminator)',
    });
  });

  it('names unknown resource types, but never echoes a strange one', () => {
    expect(validator.validate({ resourceType: 'Spaceship', id: '1' })).toEqual({ valid: false, message: 'unknown FHIR resource type Spaceship' });
    expect(validator.validate({ resourceType: 'Ann Lee 1970-01-01' })).toEqual({
      valid: false,
      message: 'unknown FHIR resource type (not a valid type name)',
    });
    expect(validator.validate({ id: '1' })).toEqual({ valid: false, message: '/resourceType: is required (required)' });
    expect(validator.validate([])).toMatchObject({ valid: false });
    expect(validator.validate('Patient')).toMatchObject({ valid: false });
  });

  it('keeps resource content out of its messages', () => {
    const results = [
      validator.validate(patient({ birthDate: 'SECRET-1970' })),
      validator.validate(patient({ gender: 'SECRET' })),
      validator.validate(patient({ 'SECRET Ann Lee': true })),
      validator.validate(patient({ name: [{ family: 42, text: 'SECRET' }] })),
    ];
    for (const result of results) {
      expect(result.valid).toBe(false);
      expect(JSON.stringify(result)).not.toMatch(/SECRET|1970|Ann Lee/);
    }
    expect(results[2]).toEqual({ valid: false, message: '/(unnamed): is not an element of this type (additionalProperties)' });
  });

  /** A Patient whose extensions nest: `levels` objects and arrays deep in all. */
  function deepPatient(levels: number): Record<string, unknown> {
    // The Patient (1), its extension array (2) and the leaf extension (3), then two levels a nesting.
    let extension: Record<string, unknown> = { url: 'http://example.org/leaf', valueString: 'x' };
    for (let depth = 3; depth < levels; depth += 2) extension = { url: 'http://example.org/nest', extension: [extension] };
    return { resourceType: 'Patient', id: 'deep', extension: [extension] };
  }

  it('refuses a resource nested deeper than 100 levels, as API bodies are, at any depth and on any thread', () => {
    const limit = deepPatient(99);
    expect(jsonNestsDeeperThan(JSON.stringify(limit), 100)).toBe(false);
    expect(jsonNestsDeeperThan(JSON.stringify(limit), 98)).toBe(true);
    expect(validator.validate(limit)).toEqual({ valid: true });
    const message = 'resource nests objects and arrays deeper than 100 levels';
    // 3,000 levels passed the schema on a reader thread (more stack) and became a run payload.
    expect(jsonNestsDeeperThan(JSON.stringify(deepPatient(101)), 100)).toBe(true);
    for (const levels of [101, 3_001, 50_001]) expect(validator.validate(deepPatient(levels))).toEqual({ valid: false, message });
  });

  it('counts depth as the text check does', () => {
    for (const value of [1, 'x', null, [], {}, [[]], { a: [{ b: {} }] }, [1, [2, [3, [4]]]], { a: 1, b: { c: [null, { d: 'e' }] } }]) {
      for (let limit = 0; limit < 6; limit++) expect(valueNestsDeeperThan(value, limit), `${JSON.stringify(value)} > ${limit}`).toBe(jsonNestsDeeperThan(JSON.stringify(value), limit));
    }
  });
});

describe('createFhirValidator: scale and isolation', () => {
  it('parses and validates a generated 10,000-entry Bundle', () => {
    const encounter = example('Encounter-example.json');
    const entry = Array.from({ length: 10_000 }, (_, n) => ({
      fullUrl: `https://ehr.example.org/Encounter/e${n}`,
      resource: { ...encounter, id: `e${n}`, status: n % 2 ? 'finished' : 'in-progress', period: { start: '2024-03-01T10:00:00Z' } },
    }));
    entry[4_321].resource.status = 'done';
    const { items } = parseDeliveryBody({ resourceType: 'Bundle', type: 'collection', entry });
    const invalid = items.flatMap((item) => {
      const result = item.kind === 'resource' ? validator.validate(item.resource) : { valid: true };
      return result.valid ? [] : [item.index];
    });
    expect(items).toHaveLength(10_000);
    expect(invalid).toEqual([4_321]);
  });

  it('knows the 146 R4 resource types, per validator instance', () => {
    const other = createFhirValidator();
    expect(other).not.toBe(validator);
    expect(other.isKnownType('Encounter')).toBe(true);
    expect(other.isKnownType('Bundle')).toBe(true);
    expect(other.isKnownType('Project')).toBe(false);
    expect(other.isKnownType('Resource')).toBe(false);
  });

  it('warm() does the first compile up front; the warmed validator judges as a lazy one does', () => {
    const warmed = createFhirValidator();
    expect(warmed.warm()).toBeGreaterThan(0);
    const patient = { resourceType: 'Patient', id: 'p1', name: [{ family: 'Rivera', given: ['Ana'] }], gender: 'female' };
    expect(warmed.validate(patient)).toEqual({ valid: true });
    expect(warmed.validate({ ...patient, gender: 'f' })).toEqual(validator.validate({ ...patient, gender: 'f' }));
    expect(warmed.validate({ resourceType: 'Observation', status: 'final', code: {} })).toEqual({ valid: true });
  });
});

describe.skipIf(!existsSync(SYNTHEA))('Synthea sample (10 patients)', () => {
  it('every resource is valid R4', () => {
    const files = readdirSync(SYNTHEA).filter((file) => file.endsWith('.ndjson'));
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      const lines = readFileSync(join(SYNTHEA, file), 'utf8').split('\n').filter((line) => line.trim() !== '');
      for (const line of lines) {
        const result = validator.validate(JSON.parse(line));
        expect(result, file).toEqual({ valid: true });
      }
    }
  });
});
