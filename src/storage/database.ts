/**
 * Row types of every table, as Kysely sees them. Both stores share one schema:
 * ids are UUID text, timestamps ISO 8601 UTC text (it sorts in time order), booleans 0/1
 * integers and JSON documents text, so one repository query serves SQLite and PostgreSQL.
 */
import type { Generated, Kysely, Transaction } from 'kysely';

export interface TenantTable {
  id: string;
  name: string;
  created_at: string;
}

export interface WorkspaceTable {
  id: string;
  tenant_id: string;
  name: string;
  created_at: string;
}

export interface ApiKeyTable {
  id: string;
  tenant_id: string;
  workspace_id: string;
  name: string;
  key_hash: string;
  /** JSON array of scope strings; empty = full access */
  scopes: string;
  environment: string;
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
}

/** Blueprints and run instances (DESIGN §6). An instance's id is its run's id. */
export interface DiagramTable {
  id: string;
  workspace_id: string;
  type: 'blueprint' | 'instance';
  name: string;
  source_id: string | null;
  /** blueprint: current version; instance: the blueprint version it was copied from */
  version: number;
  /** JSON array of tag slugs */
  tags: string;
  created_at: string;
  updated_at: string;
}

/** Immutable graph of each blueprint version: an instance is frozen by pointing at one. */
export interface BlueprintVersionTable {
  blueprint_id: string;
  version: number;
  graph: string;
  created_at: string;
}

export interface TriggerTable {
  id: string;
  workspace_id: string;
  name: string;
  source_id: string;
  type: 'web' | 'search' | 'event';
  query_id: string | null;
  event: string | null;
  /** JSON Schedule or null */
  schedule: string | null;
  next_run_at: string | null;
  /** the latest schedule tick run (migration 0018): a tick at or before it never runs again; null before the first */
  last_tick_at: string | null;
  auto_start: number;
  active: number;
  one_per_subject: number;
  /** event triggers: a FHIRPath condition a run must meet to start, or null (migration 0010) */
  when_expression: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface QueryTable {
  id: string;
  workspace_id: string;
  name: string;
  resource_type: 'Patient' | 'Pathway' | 'Practitioner';
  /** JSON array of {op, tag} */
  filters: string;
  created_at: string;
  updated_at: string;
}

export interface RunTable {
  id: string;
  workspace_id: string;
  trigger_id: string;
  source_id: string;
  source_version: number;
  name: string;
  idempotency_key: string | null;
  automation_status: string;
  /** JSON {message, nodeId} or null */
  error: string | null;
  /** JSON payload as fired (null when none was sent) */
  payload: string | null;
  subject_record_id: string | null;
  created_at: string;
  updated_at: string;
  /** Engine (0002): the worker holding the run, or null. */
  lease_owner: string | null;
  /** Engine: raised by every claim; a worker's writes name the fence it claimed with. */
  lease_fence: Generated<number>;
  /** Engine: when a worker may next claim the run (lease end, or timer); epoch = now. */
  available_at: Generated<string>;
  /** Engine: raised when an event makes the waiting run due. */
  wake_seq: Generated<number>;
  /** Engine: JSON of the run's progress through its graph, null before its first claim. */
  engine_state: string | null;
  /** Engine (0009): unexpected failures in a row since the run last executed cleanly. */
  failures: Generated<number>;
}

/** The first use of an idempotency key in a workspace, and the run it made (DESIGN §4). */
export interface IdempotencyKeyTable {
  workspace_id: string;
  key: string;
  fingerprint: string;
  trigger_id: string;
  run_id: string;
  created_at: string;
  /** What a keyed create made (a trigger, query or webhook endpoint id); null for fires and evaluations. */
  made_id: string | null;
}

/** Search records: Patients and Practitioners from ingestion, a Pathway per run. */
export interface RecordTable {
  /** The record's bit position in the tag bitmaps: assigned by the store, never changed or reused. */
  seq: Generated<number>;
  id: string;
  workspace_id: string;
  resource_type: 'Patient' | 'Pathway' | 'Practitioner';
  ext_id: string;
  name: string;
  created_at: string;
  updated_at: string;
}

/** A record's tags, one row each: what search filters on and what hits list. */
export interface RecordTagTable {
  record_id: string;
  workspace_id: string;
  tag: string;
}

/**
 * Every change to which records carry which tag, appended by triggers on `records` (the pseudo-tag
 * `*`: the record exists) and `record_tags`; folded into `tag_bitmaps` and deleted by the compactor.
 */
export interface RecordTagChangeTable {
  id: Generated<number>;
  workspace_id: string;
  resource_type: RecordTable['resource_type'];
  tag: string;
  seq: number;
  /** 1: the record carries the tag from this change on; 0: it no longer does */
  present: number;
}

/** Which records carry a tag, 65,536 record positions (`seq`) per chunk (src/modules/search/tag-bitmap.ts). */
export interface TagBitmapTable {
  workspace_id: string;
  resource_type: RecordTable['resource_type'];
  tag: string;
  chunk: number;
  bits: Uint8Array;
  /** the id of the last change folded into this chunk: a new value on every rewrite */
  version: number;
}

export interface AuditEventTable {
  id: string;
  tenant_id: string;
  workspace_id: string;
  at: string;
  action: string;
  request_id: string | null;
  key_id: string | null;
  key_name: string | null;
  resource_type: string | null;
  resource_id: string | null;
  outcome: string;
  /** JSON object */
  details: string;
}

/** The search records an audit event names, one row each (modules/audit/README.md). */
export interface AuditEventRecordTable {
  workspace_id: string;
  record_id: string;
  event_id: string;
}

export interface WebhookTable {
  id: string;
  workspace_id: string;
  name: string;
  active: number;
  /** 'signature' (default) or 'bearer' (fallback chosen at creation) */
  auth: string;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

/**
 * Secrets of a webhook endpoint. Signing needs the secret itself (HMAC), so it is kept sealed
 * (AES-256-GCM under the deployment's secret key, lib/secret-box.ts); a bearer endpoint keeps
 * only a SHA-256 hash. During a rotation overlap an endpoint has two rows.
 */
export interface WebhookSecretTable {
  id: string;
  webhook_id: string;
  sealed_secret: string | null;
  secret_hash: string;
  created_at: string;
  expires_at: string | null;
}

/** A secret of a workspace's http automations, by name; the value sealed (lib/secret-box.ts). */
export interface WorkspaceSecretTable {
  workspace_id: string;
  name: string;
  sealed_value: string;
  created_at: string;
  updated_at: string;
}

export interface RateLimitBucketTable {
  key: string;
  tokens: number;
  updated_ms: number;
  /** tokens handed out by the last take (PostgreSQL leases tokens in chunks) */
  last_grant: number;
}

/** A delivery's states (DESIGN §7): received → processing → processed | failed. */
export const DELIVERY_STATUSES = ['received', 'processing', 'processed', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** A stored webhook delivery (DESIGN §7). */
export interface DeliveryTable {
  id: string;
  tenant_id: string;
  workspace_id: string;
  webhook_id: string;
  /** request id of the POST that delivered it; carried into the audit of the runs it starts */
  request_id: string;
  idempotency_key: string | null;
  body_sha256: string;
  /** the raw body as text; null once processed */
  body: string | null;
  accepted: number;
  status: DeliveryStatus;
  attempts: number;
  lease_owner: string | null;
  lease_expires_at: string | null;
  received_at: string;
  processed_at: string | null;
  /** JSON [{index, message}] of skipped entries (capped) */
  problems: string;
  problem_count: number;
  /** JSON [{event, count}] */
  events: string;
  runs_started: number;
  error: string | null;
  /** JSON [{subjectRecordId, event, eventPayload}] not yet handed to waiting runs, else null */
  pending_wakes: string | null;
  /** the `t` (Unix seconds, as text) of the signature that proved a signed delivery, with a key or without: taken once with its body (migration 0008) */
  signature_t: string | null;
}

/** How far a delivery applied in parts has come (migration 0014; modules/deliveries/delivery-parts.ts). */
export interface DeliveryProgressTable {
  delivery_id: string;
  /** items, in delivery order, whose changes are committed */
  applied_items: number;
  /** JSON [{event, count}] raised so far */
  events: string;
  runs_started: number;
  /** JSON wakes decided so far, handed over after the last part; null for none */
  pending_wakes: string | null;
  /** JSON [{index, message}] of items skipped so far as older than the version stored; null for none (migration 0017) */
  skipped: string | null;
  updated_at: string;
}

/** The last known state of a delivered resource (ingestion). */
export interface ResourceStateTable {
  workspace_id: string;
  resource_type: string;
  resource_id: string;
  status: string | null;
  /** id of the Patient resource it belongs to (the extId of that patient's record) */
  patient_id: string | null;
  /** JSON array of the tags the resource gave its record (Patient, Practitioner), else null */
  source_tags: string | null;
  /** hash of the resource as last delivered (resource-changes.ts); null before migration 0013 and for plain records */
  content_hash: string | null;
  /** `meta.lastUpdated` of the version stored, as an ISO instant (resource-version.ts); null when it had none and before migration 0017 */
  last_updated: string | null;
  /** `meta.versionId` of the version stored; null likewise */
  version_id: string | null;
  /** 1: the resource was deleted, and the row keeps only the version deleted (a tombstone: migration 0019) */
  deleted: Generated<number>;
  delivery_id: string;
  updated_at: string;
}

/** A run decided inside a transaction and created right after through the run creator. */
export interface PlannedRunTable {
  id: string;
  tenant_id: string;
  workspace_id: string;
  trigger_id: string;
  source_id: string;
  source_version: number;
  blueprint_name: string;
  status: 'queued' | 'scheduled';
  payload: string | null;
  subject_record_id: string | null;
  idempotency_key: string | null;
  /** JSON object: how the run started, for its audit event */
  origin: string;
  request_id: string;
  key_id: string | null;
  key_name: string;
  planned_at: string;
  lease_owner: string;
  lease_expires_at: string;
}

/** One execution of one automation of a run (engine): recorded before and after it runs. */
export interface RunStepTable {
  id: string;
  run_id: string;
  node_id: string;
  automation_id: string;
  automation_type: string;
  /** 1 for the first execution; more when an earlier one never recorded its outcome. */
  attempt: number;
  started_at: string;
  finished_at: string | null;
  outcome: string | null;
  /** JSON output, or null */
  output: string | null;
  error: string | null;
}

/** A run waiting for an event about its subject (wait_for_event), and the event once it came. */
export interface RunEventWaitTable {
  run_id: string;
  node_id: string;
  automation_id: string;
  workspace_id: string;
  subject_record_id: string;
  event: string;
  started_at: string;
  received_at: string | null;
  /** JSON of the event as recorded, or null until one came */
  received_event: string | null;
}

export interface Database {
  tenants: TenantTable;
  workspaces: WorkspaceTable;
  api_keys: ApiKeyTable;
  diagrams: DiagramTable;
  blueprint_versions: BlueprintVersionTable;
  triggers: TriggerTable;
  queries: QueryTable;
  runs: RunTable;
  idempotency_keys: IdempotencyKeyTable;
  records: RecordTable;
  record_tags: RecordTagTable;
  record_tag_changes: RecordTagChangeTable;
  tag_bitmaps: TagBitmapTable;
  audit_events: AuditEventTable;
  audit_event_records: AuditEventRecordTable;
  webhooks: WebhookTable;
  webhook_secrets: WebhookSecretTable;
  workspace_secrets: WorkspaceSecretTable;
  rate_limit_buckets: RateLimitBucketTable;
  deliveries: DeliveryTable;
  delivery_progress: DeliveryProgressTable;
  resource_states: ResourceStateTable;
  planned_runs: PlannedRunTable;
  run_steps: RunStepTable;
  run_event_waits: RunEventWaitTable;
}

export type Db = Kysely<Database>;
/** A handle that may be the database or a transaction: repositories take either. */
export type DbOrTx = Kysely<Database> | Transaction<Database>;
