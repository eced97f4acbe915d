/**
 * Events raised from delivered resources (DESIGN §7). Exact, case-sensitive strings:
 * `<ResourceType>.created | .updated | .deleted`, and `<ResourceType>.<status>` when a resource
 * arrives with a status it did not have before (`Encounter.finished`, `Observation.final`).
 */

import { readFhirSchema, statusOfTypes, typesWithPatientElements, type SchemaStatus } from './fhir-schema.js';
import { SUBJECT_ELEMENTS } from './records.js';

export interface EventContext {
  /** The stored resource's status before this delivery; null/undefined when it had none. */
  previousStatus?: string | null;
  /** Whether the resource was stored before this delivery. */
  existed: boolean;
  deleted: boolean;
}

export interface EventCatalogEntry {
  event: string;
  description: string;
}

// A status becomes part of an event name only when it looks like a FHIR code, so a malformed
// value can never produce an odd event string.
const STATUS_CODE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function eventsFor(resource: { resourceType: string; status?: unknown }, context: EventContext): string[] {
  const type = resource.resourceType;
  if (context.deleted) return [`${type}.deleted`];
  const events = [`${type}.${context.existed ? 'updated' : 'created'}`];
  const { status } = resource;
  if (typeof status === 'string' && STATUS_CODE.test(status) && status !== context.previousStatus) {
    events.push(`${type}.${status}`);
  }
  return events;
}

/** The 146 resource types of FHIR R4 (4.0.1), as named by the official JSON schema. */
export const FHIR_R4_RESOURCE_TYPES: readonly string[] = `
  Account ActivityDefinition AdverseEvent AllergyIntolerance Appointment AppointmentResponse
  AuditEvent Basic Binary BiologicallyDerivedProduct BodyStructure Bundle CapabilityStatement
  CarePlan CareTeam CatalogEntry ChargeItem ChargeItemDefinition Claim ClaimResponse
  ClinicalImpression CodeSystem Communication CommunicationRequest CompartmentDefinition
  Composition ConceptMap Condition Consent Contract Coverage CoverageEligibilityRequest
  CoverageEligibilityResponse DetectedIssue Device DeviceDefinition DeviceMetric DeviceRequest
  DeviceUseStatement DiagnosticReport DocumentManifest DocumentReference EffectEvidenceSynthesis
  Encounter Endpoint EnrollmentRequest EnrollmentResponse EpisodeOfCare EventDefinition Evidence
  EvidenceVariable ExampleScenario ExplanationOfBenefit FamilyMemberHistory Flag Goal
  GraphDefinition Group GuidanceResponse HealthcareService ImagingStudy Immunization
  ImmunizationEvaluation ImmunizationRecommendation ImplementationGuide InsurancePlan Invoice
  Library Linkage List Location Measure MeasureReport Media Medication MedicationAdministration
  MedicationDispense MedicationKnowledge MedicationRequest MedicationStatement MedicinalProduct
  MedicinalProductAuthorization MedicinalProductContraindication MedicinalProductIndication
  MedicinalProductIngredient MedicinalProductInteraction MedicinalProductManufactured
  MedicinalProductPackaged MedicinalProductPharmaceutical MedicinalProductUndesirableEffect
  MessageDefinition MessageHeader MolecularSequence NamingSystem NutritionOrder Observation
  ObservationDefinition OperationDefinition OperationOutcome Organization OrganizationAffiliation
  Parameters Patient PaymentNotice PaymentReconciliation Person PlanDefinition Practitioner
  PractitionerRole Procedure Provenance Questionnaire QuestionnaireResponse RelatedPerson
  RequestGroup ResearchDefinition ResearchElementDefinition ResearchStudy ResearchSubject
  RiskAssessment RiskEvidenceSynthesis Schedule SearchParameter ServiceRequest Slot Specimen
  SpecimenDefinition StructureDefinition StructureMap Subscription Substance SubstanceNucleicAcid
  SubstancePolymer SubstanceProtein SubstanceReferenceInformation SubstanceSourceMaterial
  SubstanceSpecification SupplyDelivery SupplyRequest Task TerminologyCapabilities TestReport
  TestScript ValueSet VerificationResult VisionPrescription
`.trim().split(/\s+/);

// Where the R4 schema leaves `status` an open code, the codes of its required binding in the
// R4 (4.0.1) specification: a resource with another code is not valid FHIR, though the schema
// lets it through. Types with an open code not listed here (Contract, VerificationResult, and
// two with example bindings) take any code.
const REQUEST_STATUS = ['draft', 'active', 'on-hold', 'revoked', 'completed', 'entered-in-error', 'unknown'];
const EVENT_STATUS = ['preparation', 'in-progress', 'not-done', 'on-hold', 'stopped', 'completed', 'entered-in-error', 'unknown'];
const FINANCIAL_STATUS = ['active', 'cancelled', 'draft', 'entered-in-error'];
const OBSERVATION_STATUS = ['registered', 'preliminary', 'final', 'amended', 'corrected', 'cancelled', 'entered-in-error', 'unknown'];
const MEDICATION_STATUS = ['active', 'inactive', 'entered-in-error'];

const OPEN_CODE_VALUE_SETS: Readonly<Record<string, readonly string[]>> = {
  CarePlan: REQUEST_STATUS,
  Claim: FINANCIAL_STATUS,
  ClaimResponse: FINANCIAL_STATUS,
  ClinicalImpression: ['in-progress', 'completed', 'entered-in-error'],
  Communication: EVENT_STATUS,
  CommunicationRequest: REQUEST_STATUS,
  Coverage: FINANCIAL_STATUS,
  CoverageEligibilityRequest: FINANCIAL_STATUS,
  CoverageEligibilityResponse: FINANCIAL_STATUS,
  DetectedIssue: OBSERVATION_STATUS,
  DeviceRequest: REQUEST_STATUS,
  EnrollmentRequest: FINANCIAL_STATUS,
  EnrollmentResponse: FINANCIAL_STATUS,
  Immunization: ['completed', 'entered-in-error', 'not-done'],
  ImmunizationEvaluation: ['completed', 'entered-in-error'],
  Media: EVENT_STATUS,
  Medication: MEDICATION_STATUS,
  MedicationAdministration: ['in-progress', 'not-done', 'on-hold', 'completed', 'entered-in-error', 'stopped', 'unknown'],
  MedicationDispense: ['preparation', 'in-progress', 'cancelled', 'on-hold', 'completed', 'entered-in-error', 'stopped', 'declined', 'unknown'],
  MedicationKnowledge: MEDICATION_STATUS,
  MedicationRequest: ['active', 'on-hold', 'cancelled', 'completed', 'entered-in-error', 'stopped', 'draft', 'unknown'],
  MedicationStatement: ['active', 'completed', 'entered-in-error', 'intended', 'stopped', 'on-hold', 'unknown', 'not-taken'],
  NutritionOrder: REQUEST_STATUS,
  PaymentNotice: FINANCIAL_STATUS,
  PaymentReconciliation: FINANCIAL_STATUS,
  Procedure: EVENT_STATUS,
  RequestGroup: REQUEST_STATUS,
  RiskAssessment: OBSERVATION_STATUS,
  ServiceRequest: REQUEST_STATUS,
  VisionPrescription: FINANCIAL_STATUS,
};

/**
 * What a status event of each type can be: its codes, `'code'` for any code, `'none'` for a type
 * without a `status` element (Condition has clinicalStatus, Goal lifecycleStatus: a change there
 * raises `<Type>.updated`). From the R4 schema (read once, on first use: about 40 ms) where it
 * enumerates the codes or has no `status`, from OPEN_CODE_VALUE_SETS where it leaves a code open.
 */
let schemaRules: { status: ReadonlyMap<string, SchemaStatus>; namingAPatient: ReadonlySet<string> } | undefined;

function rulesFromSchema(): NonNullable<typeof schemaRules> {
  if (schemaRules) return schemaRules;
  const schema = readFhirSchema();
  schemaRules = {
    status: new Map(
      [...statusOfTypes(schema)].map(([name, status]) => [name, status === 'code' ? (OPEN_CODE_VALUE_SETS[name] ?? 'code') : status]),
    ),
    namingAPatient: typesWithPatientElements(schema, SUBJECT_ELEMENTS),
  };
  return schemaRules;
}

export function statusRuleOf(type: string): SchemaStatus {
  return rulesFromSchema().status.get(type) ?? 'none';
}

/**
 * Why an event, whose name is valid, is never raised for a patient, or null when it can be: a
 * Patient's deletion (its record goes with it), and every event of a type with no element that
 * points at a patient (records.ts, `subjectReferenceOf`: Practitioner, Organization, Medication).
 * A trigger on such an event starts runs without a subject; a wait on it would never wake.
 */
export function subjectlessEventProblem(name: string): string | null {
  const type = name.slice(0, name.indexOf('.'));
  if (name === 'Patient.deleted') return 'Patient.deleted is raised for no subject (the record goes with the Patient)';
  if (type === 'Patient' || rulesFromSchema().namingAPatient.has(type)) return null;
  const article = /^[AEIOU]/.test(type) ? 'an' : 'a';
  return `${name} is raised for no subject (${article} ${type} has no ${SUBJECT_ELEMENTS.join(', ')} or participant.actor reference: it belongs to no patient)`;
}

/** Every event pattern: lifecycle events for each R4 type, and each status event a type can raise. */
export function eventCatalog(): EventCatalogEntry[] {
  const catalog: EventCatalogEntry[] = [];
  for (const type of FHIR_R4_RESOURCE_TYPES) {
    const a = /^[AEIOU]/.test(type) ? `An ${type}` : `A ${type}`;
    catalog.push(
      { event: `${type}.created`, description: `${a} was delivered that was not stored before.` },
      { event: `${type}.updated`, description: `${a} already stored was delivered again, changed.` },
      { event: `${type}.deleted`, description: `${a} was deleted (a Bundle entry with request DELETE).` },
    );
    const rule = statusRuleOf(type);
    for (const status of typeof rule === 'string' ? [] : rule) {
      catalog.push({
        event: `${type}.${status}`,
        description: `${a} arrived with status "${status}", new or changed from its previous status.`,
      });
    }
  }
  return catalog;
}

const LIFECYCLE = new Set(['created', 'updated', 'deleted']);
const KNOWN_TYPES = new Set(FHIR_R4_RESOURCE_TYPES);
const EVENT_SHAPE = /^([^.]+)\.(.+)$/;

/**
 * Why carepath can never raise this event, or null when it can. A trigger or a wait on a
 * misspelt event (`Observation.finalised`, `encounter.finished`) or on a status its type does not
 * have (`Condition.active`: Condition has clinicalStatus) would wait forever without a word, so
 * both are refused when they are made. Exact and case-sensitive, like the events: the type must be
 * an R4 resource type, the suffix `created`, `updated`, `deleted` or a status code, and a status
 * code only for a type with a `status` element, one of its codes where they are known
 * (`statusRuleOf`).
 */
export function eventNameProblem(name: string): string | null {
  const shape = EVENT_SHAPE.exec(name);
  if (!shape) return 'must be <ResourceType>.<event>, such as Encounter.finished or Patient.created';
  const [, type, suffix] = shape;
  if (!KNOWN_TYPES.has(type)) {
    const meant = FHIR_R4_RESOURCE_TYPES.find((known) => known.toLowerCase() === type.toLowerCase());
    const shown = /^[A-Za-z]{1,64}$/.test(type) ? `"${type}"` : 'the part before the dot';
    return meant
      ? `${shown} is not a FHIR R4 resource type; names are case-sensitive: ${meant}`
      : `${shown} is not a FHIR R4 resource type (see GET /v1/events/catalog)`;
  }
  if (LIFECYCLE.has(suffix)) return null;
  const rule = statusRuleOf(type);
  if (rule === 'none') {
    return `${type} has no status element, so it raises no status events: its events are created, updated and deleted (a change to any element raises ${type}.updated)`;
  }
  if (!STATUS_CODE.test(suffix)) return `the part after the dot must be created, updated, deleted or a status code of ${type}`;
  if (rule !== 'code' && !rule.includes(suffix)) {
    return `${type} has no status "${suffix}": its events are created, updated, deleted, ${rule.join(', ')}`;
  }
  return null;
}
