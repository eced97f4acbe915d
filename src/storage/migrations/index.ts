/**
 * Every migration, in order. Listed by hand (not read from disk) so that the set is the same
 * under tsx, a bundler or a test runner. A new migration is a new file and a new line here.
 */
import type { Migration } from 'kysely';
import * as m0001 from './0001_core.js';
import * as m0002 from './0002_engine.js';
import * as m0003 from './0003_ingestion.js';
import * as m0004 from './0004_tag_bitmaps.js';
import * as m0005 from './0005_tag_log_lookups.js';
import * as m0006 from './0006_deliveries_claim_by_lease.js';
import * as m0007 from './0007_workspace_secrets.js';
import * as m0008 from './0008_deliveries_signed_once.js';
import * as m0009 from './0009_run_execution_failures.js';
import * as m0010 from './0010_event_trigger_when.js';
import * as m0011 from './0011_trigger_next_run_cleanup.js';
import * as m0012 from './0012_runs_by_workspace_trigger.js';
import * as m0013 from './0013_resource_state_content_hash.js';
import * as m0014 from './0014_delivery_progress.js';
import * as m0015 from './0015_deliveries_lease_holder.js';
import * as m0016 from './0016_idempotent_creates.js';
import * as m0017 from './0017_resource_versions.js';
import * as m0018 from './0018_trigger_last_tick.js';
import * as m0019 from './0019_resource_state_tombstones.js';
import * as m0020 from './0020_search_inputs_check.js';
import * as m0021 from './0021_audit_event_records.js';
import * as m0022 from './0022_runs_by_idempotency_key.js';

export const migrations: Record<string, Migration> = {
  '0001_core': m0001,
  '0002_engine': m0002,
  '0003_ingestion': m0003,
  '0004_tag_bitmaps': m0004,
  '0005_tag_log_lookups': m0005,
  '0006_deliveries_claim_by_lease': m0006,
  '0007_workspace_secrets': m0007,
  '0008_deliveries_signed_once': m0008,
  '0009_run_execution_failures': m0009,
  '0010_event_trigger_when': m0010,
  '0011_trigger_next_run_cleanup': m0011,
  '0012_runs_by_workspace_trigger': m0012,
  '0013_resource_state_content_hash': m0013,
  '0014_delivery_progress': m0014,
  '0015_deliveries_lease_holder': m0015,
  '0016_idempotent_creates': m0016,
  '0017_resource_versions': m0017,
  '0018_trigger_last_tick': m0018,
  '0019_resource_state_tombstones': m0019,
  '0020_search_inputs_check': m0020,
  '0021_audit_event_records': m0021,
  '0022_runs_by_idempotency_key': m0022,
};
