/**
 * Events raised from delivered resources (DESIGN §7). Exact, case-sensitive strings:
 * `<ResourceType>.created | .updated | .deleted`, and `<ResourceType>.<status>` when a resource
 * arrives with a status it did not have before (`Encounter.finished`, `Observation.final`).
 */

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

// The R4 (4.0.1) required value sets of `status` for the types pathways most often wait on.
// Condition is absent on purpose: it has clinicalStatus/verificationStatus, not status.
const REQUEST_STATUS = ['draft', 'active', 'on-hold', 'revoked', 'completed', 'entered-in-error', 'unknown'];
const EVENT_STATUS = ['preparation', 'in-progress', 'not-done', 'on-hold', 'stopped', 'completed', 'entered-in-error', 'unknown'];

export const STATUS_VALUE_SETS: Readonly<Record<string, readonly string[]>> = {
  Appointment: ['proposed', 'pending', 'booked', 'arrived', 'fulfilled', 'cancelled', 'noshow', 'entered-in-error', 'checked-in', 'waitlist'],
  CarePlan: REQUEST_STATUS,
  DiagnosticReport: ['registered', 'partial', 'preliminary', 'final', 'amended', 'corrected', 'appended', 'cancelled', 'entered-in-error', 'unknown'],
  Encounter: ['planned', 'arrived', 'triaged', 'in-progress', 'onleave', 'finished', 'cancelled', 'entered-in-error', 'unknown'],
  Immunization: ['completed', 'entered-in-error', 'not-done'],
  MedicationRequest: ['active', 'on-hold', 'cancelled', 'completed', 'entered-in-error', 'stopped', 'draft', 'unknown'],
  Observation: ['registered', 'preliminary', 'final', 'amended', 'corrected', 'cancelled', 'entered-in-error', 'unknown'],
  Procedure: EVENT_STATUS,
  ServiceRequest: REQUEST_STATUS,
  Task: ['draft', 'requested', 'received', 'accepted', 'rejected', 'ready', 'cancelled', 'in-progress', 'on-hold', 'failed', 'completed', 'entered-in-error'],
};

/** Every event pattern: lifecycle events for each R4 type, status events for the common ones. */
export function eventCatalog(): EventCatalogEntry[] {
  const catalog: EventCatalogEntry[] = [];
  for (const type of FHIR_R4_RESOURCE_TYPES) {
    const a = /^[AEIOU]/.test(type) ? `An ${type}` : `A ${type}`;
    catalog.push(
      { event: `${type}.created`, description: `${a} was delivered that was not stored before.` },
      { event: `${type}.updated`, description: `${a} already stored was delivered again.` },
      { event: `${type}.deleted`, description: `${a} was deleted (a Bundle entry with request DELETE).` },
    );
    for (const status of STATUS_VALUE_SETS[type] ?? []) {
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
 * misspelt event (`Observation.finalised`, `encounter.finished`) would wait forever without a
 * word, so both are refused when they are made. Exact and case-sensitive, like the events: the
 * type must be an R4 resource type, the suffix `created`, `updated`, `deleted` or a status code,
 * and for the types whose status value set the catalogue lists, one of those codes (a resource
 * with any other status fails the R4 schema and is skipped, so it raises nothing).
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
  if (!STATUS_CODE.test(suffix)) return `the part after the dot must be created, updated, deleted or a status code of ${type}`;
  const statuses = STATUS_VALUE_SETS[type];
  if (statuses && !statuses.includes(suffix)) {
    return `${type} has no status "${suffix}": its events are created, updated, deleted, ${statuses.join(', ')}`;
  }
  return null;
}
