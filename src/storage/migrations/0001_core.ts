/**
 * The core schema: tenancy, keys, diagrams, triggers, queries, runs, records, audit, webhooks.
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 * The same statements serve SQLite and PostgreSQL (text ids, ISO text times, 0/1 integers).
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('tenants')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('workspaces')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('workspaces_tenant_name', ['tenant_id', 'name'])
    .execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('environment', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('revoked_at', 'text')
    .addColumn('last_used_at', 'text')
    .execute();
  await db.schema.createIndex('api_keys_workspace').on('api_keys').columns(['workspace_id', 'id']).execute();

  await db.schema
    .createTable('diagrams')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('source_id', 'text')
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('tags', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('diagrams_list').on('diagrams').columns(['workspace_id', 'type', 'id']).execute();

  await db.schema
    .createTable('blueprint_versions')
    .addColumn('blueprint_id', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('graph', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('blueprint_versions_pk', ['blueprint_id', 'version'])
    .execute();

  await db.schema
    .createTable('triggers')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('source_id', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('query_id', 'text')
    .addColumn('event', 'text')
    .addColumn('schedule', 'text')
    .addColumn('next_run_at', 'text')
    .addColumn('auto_start', 'integer', (c) => c.notNull())
    .addColumn('active', 'integer', (c) => c.notNull())
    .addColumn('one_per_subject', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('deleted_at', 'text')
    .execute();
  await db.schema.createIndex('triggers_list').on('triggers').columns(['workspace_id', 'id']).execute();
  await db.schema.createIndex('triggers_event').on('triggers').columns(['workspace_id', 'event']).execute();
  await db.schema.createIndex('triggers_query').on('triggers').columns(['query_id']).execute();
  await db.schema.createIndex('triggers_due').on('triggers').columns(['next_run_at']).execute();

  await db.schema
    .createTable('queries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('resource_type', 'text', (c) => c.notNull())
    .addColumn('filters', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('queries_list').on('queries').columns(['workspace_id', 'id']).execute();

  await db.schema
    .createTable('runs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('trigger_id', 'text', (c) => c.notNull())
    .addColumn('source_id', 'text', (c) => c.notNull())
    .addColumn('source_version', 'integer', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('idempotency_key', 'text')
    .addColumn('automation_status', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('payload', 'text')
    .addColumn('subject_record_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('runs_list').on('runs').columns(['workspace_id', 'id']).execute();
  await db.schema.createIndex('runs_source').on('runs').columns(['workspace_id', 'source_id', 'id']).execute();
  await db.schema.createIndex('runs_trigger').on('runs').columns(['trigger_id', 'id']).execute();
  await db.schema.createIndex('runs_trigger_status').on('runs').columns(['trigger_id', 'automation_status']).execute();
  await db.schema.createIndex('runs_idempotency').on('runs').columns(['workspace_id', 'idempotency_key']).execute();
  await db.schema.createIndex('runs_status').on('runs').columns(['workspace_id', 'automation_status', 'id']).execute();
  await db.schema.createIndex('runs_subject').on('runs').columns(['subject_record_id', 'trigger_id']).execute();

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('trigger_id', 'text', (c) => c.notNull())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['workspace_id', 'key'])
    .execute();

  await db.schema
    .createTable('records')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('resource_type', 'text', (c) => c.notNull())
    .addColumn('ext_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('records_ext', ['workspace_id', 'resource_type', 'ext_id'])
    .execute();
  for (const order of ['name', 'created_at', 'updated_at', 'ext_id']) {
    await db.schema
      .createIndex(`records_by_${order}`)
      .on('records')
      .columns(['workspace_id', 'resource_type', order, 'id'])
      .execute();
  }

  await db.schema
    .createTable('record_tags')
    .addColumn('record_id', 'text', (c) => c.notNull())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('tag', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('record_tags_pk', ['record_id', 'tag'])
    .execute();
  await db.schema.createIndex('record_tags_by_tag').on('record_tags').columns(['workspace_id', 'tag', 'record_id']).execute();

  await db.schema
    .createTable('audit_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text')
    .addColumn('key_id', 'text')
    .addColumn('key_name', 'text')
    .addColumn('resource_type', 'text')
    .addColumn('resource_id', 'text')
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('details', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('audit_list').on('audit_events').columns(['workspace_id', 'id']).execute();
  await db.schema.createIndex('audit_action').on('audit_events').columns(['workspace_id', 'action', 'id']).execute();

  await db.schema
    .createTable('webhooks')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('active', 'integer', (c) => c.notNull())
    .addColumn('auth', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('deleted_at', 'text')
    .execute();
  await db.schema.createIndex('webhooks_list').on('webhooks').columns(['workspace_id', 'id']).execute();

  await db.schema
    .createTable('webhook_secrets')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('webhook_id', 'text', (c) => c.notNull())
    .addColumn('sealed_secret', 'text')
    .addColumn('secret_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text')
    .execute();
  await db.schema.createIndex('webhook_secrets_webhook').on('webhook_secrets').columns(['webhook_id']).execute();

  await db.schema
    .createTable('rate_limit_buckets')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('tokens', 'double precision', (c) => c.notNull())
    .addColumn('updated_ms', 'bigint', (c) => c.notNull())
    .addColumn('last_grant', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('carepath migrations are forward-only; restore a backup to go back');
}
