import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/lib/errors.js';
import {
  MAX_BUNDLE_DEPTH,
  parseDeliveryBody,
  resourcesByFullUrl,
  type DeliveryItem,
  type FhirResource,
} from '../../src/ingestion/delivery-body.js';
import { checkPlainRecord, recordFromResource, slugTag, subjectReferenceOf } from '../../src/ingestion/records.js';
import { SYNTHEA_FIXTURES } from '../helpers/shared-files.js';

const EXAMPLES = join(process.cwd(), 'node_modules/hl7.fhir.r4.examples');
const SYNTHEA = SYNTHEA_FIXTURES;

const example = (file: string): FhirResource => JSON.parse(readFileSync(join(EXAMPLES, file), 'utf8')) as FhirResource;

const resources = (items: DeliveryItem[]) =>
  items.flatMap((item) => (item.kind === 'resource' ? [item] : []));

function rejection(body: unknown): ApiError {
  try {
    parseDeliveryBody(body);
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    return error as ApiError;
  }
  throw new Error('expected the body to be rejected');
}

describe('parseDeliveryBody: body shapes', () => {
  it('takes a single FHIR resource as one item, untouched', () => {
    const patient = example('Patient-example.json');
    const { items, problems } = parseDeliveryBody(patient);
    expect(problems).toEqual([]);
    expect(items).toEqual([{ kind: 'resource', resource: patient, deleted: false, index: 0 }]);
    expect(items[0]).not.toHaveProperty('fullUrl');
    expect(resources(items)[0].resource).toBe(patient);
  });

  it('takes a searchset Bundle, keeping fullUrls', () => {
    const { items, problems } = parseDeliveryBody(example('Bundle-bundle-example.json'));
    expect(problems).toEqual([]);
    expect(resources(items).map((i) => [i.resource.resourceType, i.resource.id, i.fullUrl, i.index])).toEqual([
      ['MedicationRequest', '3123', 'https://example.com/base/MedicationRequest/3123', 0],
      ['Medication', 'example', 'https://example.com/base/Medication/example', 1],
    ]);
  });

  it('takes the HL7 transaction example: POST, PUT, DELETE, and reports what it cannot use', () => {
    const bundle = example('Bundle-bundle-transaction.json');
    const { items, problems } = parseDeliveryBody(bundle);
    expect(resources(items).map((i) => [i.index, i.resource.resourceType, i.resource.id, i.deleted])).toEqual([
      [0, 'Patient', '61ebe359-bfdc-4613-8bf2-c5e300945f0a', false],
      [1, 'Patient', '88f151c0-a954-468a-88bd-5ae15c08e059', false],
      [2, 'Patient', '123', false],
      [3, 'Patient', '74891afc-ed52-42a2-bcd7-f13d9b60f096', false],
      [4, 'Patient', '123a', false],
      [5, 'Patient', '234', true],
    ]);
    expect(problems).toEqual([
      { index: 6, message: 'conditional DELETE (request.url with a search) is not supported' },
      // POST ValueSet/$lookup with its Parameters: an operation call, not data.
      { index: 7, message: 'operation call (request.url names a $operation), not data: not applied' },
      { index: 8, message: 'Bundle entry with request GET carries no resource' },
      { index: 9, message: 'Bundle entry with request GET carries no resource' },
    ]);
    // The id taken from a urn:uuid fullUrl is set on a copy; the delivered body stays as it came.
    expect((bundle.entry as Array<{ resource: FhirResource }>)[0].resource.id).toBeUndefined();
  });

  it('takes the {resourceType, bundle} wrapper like the Bundle itself', () => {
    const bundle = example('Bundle-bundle-transaction.json');
    expect(parseDeliveryBody({ resourceType: 'Bundle', bundle })).toEqual(parseDeliveryBody(bundle));
    expect(parseDeliveryBody({ resourceType: 'Encounter', bundle: example('Bundle-bundle-example.json') }).items).toHaveLength(2);
  });

  it('takes one plain record', () => {
    const body = { resourceType: 'Practitioner', extId: 'npi-1234', name: '  Dr.  Jane   Doe ', tags: ['cardiology', 'on-call'] };
    expect(parseDeliveryBody(body)).toEqual({
      items: [{ kind: 'record', index: 0, record: { resourceType: 'Practitioner', extId: 'npi-1234', name: 'Dr. Jane Doe', tags: ['cardiology', 'on-call'] } }],
      problems: [],
    });
  });

  it('takes {records: [...]}, with bad records as problems at their index', () => {
    const { items, problems } = parseDeliveryBody({
      records: [
        { resourceType: 'Patient', extId: 'p-1', name: 'Ann Lee', tags: ['vip', 'vip'] },
        { resourceType: 'Encounter', extId: 'e-1', name: 'x' },
        { resourceType: 'Patient', extId: 'p-2' },
        'not a record',
        { resourceType: 'Patient', extId: 'p-3', tags: ['Not A Slug'] },
      ],
    });
    expect(items).toEqual([
      { kind: 'record', index: 0, record: { resourceType: 'Patient', extId: 'p-1', name: 'Ann Lee', tags: ['vip'] } },
      { kind: 'record', index: 2, record: { resourceType: 'Patient', extId: 'p-2', name: 'p-2', tags: [] } },
    ]);
    expect(problems).toEqual([
      { index: 1, message: 'record resourceType must be Patient or Practitioner' },
      { index: 3, message: 'a record must be a JSON object' },
      { index: 4, message: 'record tags[0] must match ^[a-z0-9][a-z0-9._:-]{0,63}$' },
    ]);
  });

  it('takes an empty Bundle and an empty records list as no items', () => {
    expect(parseDeliveryBody({ resourceType: 'Bundle', type: 'collection' })).toEqual({ items: [], problems: [] });
    expect(parseDeliveryBody({ records: [] })).toEqual({ items: [], problems: [] });
  });

  it.each([
    ['null', null],
    ['an array', [{ resourceType: 'Patient', id: '1' }]],
    ['a string', '{"resourceType":"Patient"}'],
    ['a number', 42],
    ['an object without resourceType', { id: '1', name: 'x' }],
    ['a non-string resourceType', { resourceType: 5 }],
    ['a resourceType that is no type name', { resourceType: 'patient record' }],
    ['records that are not an array', { records: { resourceType: 'Patient' } }],
    ['a wrapper whose bundle is no Bundle', { resourceType: 'Bundle', bundle: { resourceType: 'Patient' } }],
    ['a Bundle whose entry is not an array', { resourceType: 'Bundle', entry: { resource: {} } }],
    ['one resource of a type FHIR R4 does not have', { resourceType: 'Foo', id: 'x' }],
    ['one resource without an id', { resourceType: 'Patient', name: [{ family: 'Lee' }] }],
    ['one plain record with a field records do not have', { resourceType: 'Patient', extId: 'rec-3', name: 'A', foo: 1 }],
    ['one plain record of another type', { resourceType: 'Observation', extId: 'o-1' }],
  ])('rejects %s with invalid_request', (_what, body) => {
    const error = rejection(body);
    expect(error.code).toBe('invalid_request');
    expect(error.status).toBe(400);
    expect(error.message.length).toBeGreaterThan(10);
  });
});

describe('parseDeliveryBody: Bundle entries', () => {
  const bundle = (entry: unknown[]) => ({ resourceType: 'Bundle', type: 'transaction', entry });

  it('reads DELETE entries from request.url, relative or absolute', () => {
    const { items, problems } = parseDeliveryBody(
      bundle([
        { request: { method: 'DELETE', url: 'Observation/abc-1' } },
        { request: { method: 'DELETE', url: 'https://ehr.example.org/fhir/Encounter/e.2' } },
        { request: { method: 'DELETE', url: '/Patient/9' }, resource: { resourceType: 'Patient', id: 'ignored' } },
        { request: { method: 'DELETE', url: 'Patient/1/_history/2' } },
        { request: { method: 'DELETE' } },
      ]),
    );
    expect(items).toEqual([
      { kind: 'resource', resource: { resourceType: 'Observation', id: 'abc-1' }, deleted: true, index: 0 },
      { kind: 'resource', resource: { resourceType: 'Encounter', id: 'e.2' }, deleted: true, index: 1 },
      { kind: 'resource', resource: { resourceType: 'Patient', id: '9' }, deleted: true, index: 2 },
    ]);
    expect(problems).toEqual([
      { index: 3, message: 'DELETE entry request.url must be <ResourceType>/<id>' },
      { index: 4, message: 'DELETE entry request.url must be <ResourceType>/<id>' },
    ]);
  });

  it('turns unusable entries into problems that quote no resource content', () => {
    const { items, problems } = parseDeliveryBody(
      bundle([
        42,
        {},
        { resource: { resourceType: 'Patient', name: [{ text: 'Secret Person' }] } },
        { fullUrl: 'https://ehr.example.org/Patient/x', resource: { resourceType: 'Patient', birthDate: '1970-01-01' } },
        { resource: { resourceType: 7, id: 'x' } },
        { request: { method: 'Secret Person' } },
        { resource: { resourceType: 'Patient', id: 'ok' } },
      ]),
    );
    expect(resources(items).map((i) => i.index)).toEqual([6]);
    expect(problems).toEqual([
      { index: 0, message: 'Bundle entry must be a JSON object' },
      { index: 1, message: 'Bundle entry carries no resource' },
      { index: 2, message: 'Patient has no id (and no urn:uuid fullUrl to take one from)' },
      { index: 3, message: 'Patient has no id (and no urn:uuid fullUrl to take one from)' },
      { index: 4, message: 'resource has no valid resourceType' },
      { index: 5, message: 'Bundle entry carries no resource' },
    ]);
    expect(JSON.stringify(problems)).not.toMatch(/Secret|1970/);
  });

  it('flattens Bundles held in entries (a collection of Bundles, a batch-response of searchsets)', () => {
    const collection = example('Bundle-72ac8493-52ac-41bd-8d5d-7258c289b5ea.json');
    const inner = (collection.entry as Array<{ resource: { entry?: unknown[] } }>).reduce((n, e) => n + (e.resource.entry?.length ?? 0), 0);
    const { items, problems } = parseDeliveryBody(collection);
    expect(problems).toEqual([]);
    expect(items).toHaveLength(inner);
    expect(items.map((i) => i.index)).toEqual([...Array(inner).keys()]);

    const batchResponse = parseDeliveryBody(example('Bundle-bundle-response-medsallergies.json'));
    expect(resources(batchResponse.items).map((i) => i.resource.resourceType)).toEqual(['Patient']);
  });

  it(`rejects Bundles nested deeper than ${MAX_BUNDLE_DEPTH}`, () => {
    const wrap = (inner: object) => ({ resourceType: 'Bundle', type: 'collection', entry: [{ resource: inner }] });
    const leaf = { resourceType: 'Patient', id: 'p' };
    expect(parseDeliveryBody(wrap(wrap(leaf))).items).toHaveLength(1);
    expect(rejection(wrap(wrap(wrap(leaf)))).message).toMatch(/nest at most 2 deep/);
    expect(rejection({ resourceType: 'Bundle', bundle: wrap(wrap(wrap(leaf))) }).code).toBe('invalid_request');

    // Far deeper than any call stack: still one clear rejection, never a RangeError.
    let deep: object = leaf;
    for (let i = 0; i < 100_000; i++) deep = wrap(deep);
    expect(rejection(deep).message).toMatch(/nest at most 2 deep/);
  });

  it('parses a 10,000-entry Bundle', () => {
    const encounter = example('Encounter-example.json');
    const entry = Array.from({ length: 10_000 }, (_, n) => ({
      fullUrl: `https://ehr.example.org/Encounter/e${n}`,
      resource: { ...encounter, id: `e${n}` },
    }));
    const { items, problems } = parseDeliveryBody({ resourceType: 'Bundle', type: 'collection', entry });
    expect(problems).toEqual([]);
    expect(items).toHaveLength(10_000);
    expect(items[9_999]).toMatchObject({ index: 9_999, resource: { id: 'e9999' } });
  });
});

describe('recordFromResource', () => {
  const patient = (fields: Record<string, unknown>): FhirResource => ({ resourceType: 'Patient', id: 'p1', ...fields });

  it('makes records of the HL7 Patient and Practitioner examples', () => {
    expect(recordFromResource(example('Patient-example.json'))).toEqual({
      resourceType: 'Patient',
      extId: 'example',
      name: 'Peter James Chalmers',
      tags: [],
    });
    expect(recordFromResource(example('Practitioner-example.json'))).toMatchObject({
      resourceType: 'Practitioner',
      extId: 'example',
      name: 'Adam Careful',
    });
  });

  it('returns null for other types and for resources without an id', () => {
    expect(recordFromResource(example('Encounter-example.json'))).toBeNull();
    expect(recordFromResource({ resourceType: 'Patient' })).toBeNull();
  });

  it.each([
    ['text wins over parts', [{ text: ' Dr.  Ann   Lee ', given: ['X'], family: 'Y' }], 'Dr. Ann Lee'],
    ['given names then family', [{ given: ['Ann', 'Marie'], family: 'Lee' }], 'Ann Marie Lee'],
    ['family only', [{ family: 'Lee' }], 'Lee'],
    ['empty parts are skipped', [{ given: ['', '  ', 'Ann'], family: '' }], 'Ann'],
    ['only the first HumanName counts', [{ family: 'First' }, { text: 'Second' }], 'First'],
    ['a name without parts falls back to the id', [{ use: 'official' }], 'p1'],
    ['blank text falls back to parts', [{ text: '   ', family: 'Lee' }], 'Lee'],
    ['non-object names are passed over', [null, 'Ann', { family: 'Lee' }], 'Lee'],
    ['no name array falls back to the id', undefined, 'p1'],
    ['an empty name array falls back to the id', [], 'p1'],
  ])('name: %s', (_case, name, expected) => {
    expect(recordFromResource(patient({ name }))?.name).toBe(expected);
  });

  it('slugs, de-duplicates and drops meta.tag codes', () => {
    const long = 'a'.repeat(80);
    const record = recordFromResource(
      patient({
        meta: {
          tag: [
            { code: 'VIP' },
            { code: 'High Risk!!' },
            { code: 'vip' },
            { code: 'Diabète' },
            { code: '--x--' },
            { code: '' },
            { code: '***' },
            { code: long },
            { code: 'urn:oid:1.2.3' },
            { system: 'http://example.org', display: 'no code' },
            { code: 12 },
            null,
          ],
        },
      }),
    );
    // 80 characters: not cut to 64 (two long codes would become one tag), not taken.
    expect(record?.tags).toEqual(['vip', 'high-risk', 'diabete', 'x', 'urn:oid:1.2.3']);
  });

  it('slugTag: separators trimmed; 64 characters at most, a longer slug not taken', () => {
    expect(slugTag('  Care Plan / 2024 ')).toBe('care-plan-2024');
    expect(slugTag('_x_')).toBe('x');
    expect(slugTag(`--${'b'.repeat(64)}--`)).toBe('b'.repeat(64));
    expect(slugTag(`${'b'.repeat(63)}-tail`)).toBeNull();
    expect(slugTag(`${'a'.repeat(70)}-one`)).toBeNull();
    expect(slugTag(`${'a'.repeat(70)}-two`)).toBeNull();
  });

  it('slugTag: a code whose letters a slug cannot hold is not taken, never merged with another', () => {
    // Both became `type2`: diabetes and hypertension one tag.
    expect(slugTag('糖尿病 type2')).toBeNull();
    expect(slugTag('高血压 type2')).toBeNull();
    expect(slugTag('日本')).toBeNull();
    expect(slugTag('ΕΛΛΗΝΙΚΑ')).toBeNull();
    expect(slugTag('Диабет')).toBeNull();
    // Accents dropped, a few letters spelled out, compatibility forms decomposed.
    expect(slugTag('Straße')).toBe('strasse');
    expect(slugTag('Æble Ølstykke Łódź')).toBe('aeble-olstykke-lodz');
    expect(slugTag('Café-Crème')).toBe('cafe-creme');
    expect(slugTag('Type²')).toBe('type2');
    // Symbols and punctuation are separators, not letters.
    expect(slugTag('High Risk ★ 2024')).toBe('high-risk-2024');
  });
});

describe('checkPlainRecord', () => {
  it.each([
    [{ resourceType: 'Patient', extId: 'p', nme: 'typo' }, 'unknown record field nme; allowed: resourceType, extId, name, tags'],
    [{ resourceType: 'Patient', extId: '' }, 'record extId must be a non-empty string of at most 128 characters without control characters'],
    [{ resourceType: 'Patient', extId: 'x'.repeat(129) }, 'record extId must be a non-empty string of at most 128 characters without control characters'],
    [{ resourceType: 'Patient', extId: 'a\nb' }, 'record extId must be a non-empty string of at most 128 characters without control characters'],
    [{ resourceType: 'Patient', extId: 'p', name: 7 }, 'record name must be a string of at most 512 characters'],
    [{ resourceType: 'Patient', extId: 'p', tags: 'vip' }, 'record tags must be an array of at most 100 tags'],
    [{ resourceType: 'Patient', extId: 'p', tags: ['ok', 3] }, 'record tags[1] must match ^[a-z0-9][a-z0-9._:-]{0,63}$'],
    [{ resourceType: 'Patient', extId: 'p', 'Secret Person': 1 }, 'unknown record field (unnamed); allowed: resourceType, extId, name, tags'],
  ])('%j → problem', (value, problem) => {
    expect(checkPlainRecord(value)).toEqual({ problem });
  });
});

describe('subjectReferenceOf', () => {
  const encounter = (subject: unknown): FhirResource => ({ resourceType: 'Encounter', id: 'e', class: { code: 'AMB' }, subject });

  it('finds the patient of HL7 examples (subject, patient)', () => {
    expect(subjectReferenceOf(example('Patient-example.json'))).toBe('example');
    expect(subjectReferenceOf(example('Encounter-example.json'))).toBe('example');
    expect(subjectReferenceOf(example('Immunization-example.json'))).toBe('example');
    expect(subjectReferenceOf(example('Coverage-9876B1.json'))).toBe('4');
  });

  it.each([
    ['absolute', 'https://ehr.example.org/fhir/Patient/42', '42'],
    ['versioned', 'Patient/42/_history/3', '42'],
    ['another type', 'Group/101', null],
    ['conditional', 'Patient?identifier=http://x|1', null],
    ['contained', '#p1', null],
    ['an unresolved urn:uuid', 'urn:uuid:0d3b3b6e-34cc-4a47-9d5b-8a4c4c4c4c4c', null],
  ])('reference %s', (_case, reference, expected) => {
    expect(subjectReferenceOf(encounter({ reference }))).toBe(expected);
  });

  it('finds an Appointment\'s patient among its participants, whatever their order; only a Patient counts', () => {
    expect(subjectReferenceOf(example('Appointment-example.json'))).toBe('example');
    const appointment = (actors: string[]): FhirResource => ({
      resourceType: 'Appointment',
      id: 'a',
      status: 'booked',
      participant: actors.map((reference) => ({ actor: { reference }, status: 'accepted' })),
    });
    expect(subjectReferenceOf(appointment(['Practitioner/dr', 'Location/1', 'Patient/p-ok']))).toBe('p-ok');
    expect(subjectReferenceOf(appointment(['Practitioner/dr', 'Location/1']))).toBeNull();
  });

  it('returns null without a reference', () => {
    expect(subjectReferenceOf(encounter(undefined))).toBeNull();
    expect(subjectReferenceOf(encounter({ display: 'Ann' }))).toBeNull();
    expect(subjectReferenceOf({ resourceType: 'Organization', id: 'o' })).toBeNull();
  });

  it('resolves urn:uuid references against the fullUrls of the same Bundle', () => {
    const patientUrn = 'urn:uuid:3f1b9f8e-7a56-4a0d-9a43-6f1d5b2a9c11';
    const groupUrn = 'urn:uuid:7c0e4b1e-1111-4c6a-8d2e-9b0a3e5f6a7b';
    const { items } = parseDeliveryBody({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { fullUrl: patientUrn, resource: { resourceType: 'Patient', name: [{ family: 'Lee' }] }, request: { method: 'POST', url: 'Patient' } },
        { fullUrl: groupUrn, resource: { resourceType: 'Group', id: 'g', type: 'person', actual: true }, request: { method: 'POST', url: 'Group' } },
        { fullUrl: 'urn:uuid:0b1c2d3e-4f50-4a6b-8c7d-8e9fa0b1c2d3', resource: encounter({ reference: patientUrn }), request: { method: 'POST', url: 'Encounter' } },
        { fullUrl: 'urn:uuid:1b1c2d3e-4f50-4a6b-8c7d-8e9fa0b1c2d3', resource: encounter({ reference: groupUrn }), request: { method: 'POST', url: 'Encounter' } },
      ],
    });
    const byFullUrl = resourcesByFullUrl(items);
    const [patient, , toPatient, toGroup] = resources(items).map((i) => i.resource);
    expect(subjectReferenceOf(patient, byFullUrl)).toBe('3f1b9f8e-7a56-4a0d-9a43-6f1d5b2a9c11');
    expect(subjectReferenceOf(toPatient, byFullUrl)).toBe('3f1b9f8e-7a56-4a0d-9a43-6f1d5b2a9c11');
    expect(subjectReferenceOf(toGroup, byFullUrl)).toBeNull();
  });

  it('tries subject, patient, beneficiary, individual in turn', () => {
    expect(subjectReferenceOf({ resourceType: 'Coverage', id: 'c', beneficiary: { reference: 'Patient/b' } })).toBe('b');
    expect(subjectReferenceOf({ resourceType: 'ResearchSubject', id: 'r', individual: { reference: 'Patient/i' } })).toBe('i');
    expect(
      subjectReferenceOf({ resourceType: 'X', id: 'x', subject: { reference: 'Group/1' }, patient: { reference: 'Patient/p' } }),
    ).toBe('p');
  });
});

describe.skipIf(!existsSync(SYNTHEA))('Synthea sample (10 patients)', () => {
  const read = (type: string): FhirResource[] =>
    readdirSync(SYNTHEA)
      .filter((file) => file.startsWith(`${type}.`) && file.endsWith('.ndjson'))
      .flatMap((file) => readFileSync(join(SYNTHEA, file), 'utf8').split('\n'))
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as FhirResource);

  it('every Patient and Practitioner yields a named record', () => {
    for (const type of ['Patient', 'Practitioner']) {
      const all = read(type);
      expect(all.length).toBeGreaterThan(0);
      for (const resource of all) {
        const record = recordFromResource(resource);
        expect(record).toMatchObject({ resourceType: type, extId: resource.id });
        expect(record!.name).not.toBe(resource.id);
      }
    }
  });

  it('every Encounter, in a collection Bundle, resolves to a delivered Patient', () => {
    const patients = read('Patient');
    const encounters = read('Encounter');
    const entry = [...patients, ...encounters].map((resource) => ({ fullUrl: `urn:uuid:${resource.id}`, resource }));
    const { items, problems } = parseDeliveryBody({ resourceType: 'Bundle', type: 'collection', entry });
    expect(problems).toEqual([]);
    const patientIds = new Set(patients.map((p) => p.id));
    const byFullUrl = resourcesByFullUrl(items);
    for (const item of resources(items).filter((i) => i.resource.resourceType === 'Encounter')) {
      expect(patientIds.has(subjectReferenceOf(item.resource, byFullUrl) ?? '')).toBe(true);
    }
  });
});

describe('parseDeliveryBody: PATCH entries', () => {
  it('skips a PATCH entry, whatever it carries: the patch is not the resource', () => {
    const { items, problems } = parseDeliveryBody({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          fullUrl: 'urn:uuid:2b2b8c3e-1f0e-4c1a-9f57-0d7c3f1f6a11',
          resource: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }] }] },
          request: { method: 'PATCH', url: 'Patient/p123' },
        },
        { resource: { resourceType: 'Binary', id: 'b1', contentType: 'application/json-patch+json' }, request: { method: 'PATCH', url: 'Patient/p123' } },
        { resource: { resourceType: 'Patient', id: 'p123' }, request: { method: 'PUT', url: 'Patient/p123' } },
      ],
    });
    const skipped = 'PATCH entry (it carries a patch, not the resource): not applied; send the whole resource with PUT';
    expect(problems).toEqual([
      { index: 0, message: skipped },
      { index: 1, message: skipped },
    ]);
    expect(resources(items).map((i) => [i.index, i.resource.resourceType, i.resource.id])).toEqual([[2, 'Patient', 'p123']]);
  });
});
