/**
 * Secrets a workspace's `http` automations send to partners (an API token in a header), set by
 * the operator with `carepath admin secret set` and named in blueprints as `${secrets.NAME}`.
 * The value is sealed like a webhook secret (lib/secret-box.ts: AES-256-GCM under
 * CAREPATH_SECRET_KEY); blueprints, runs and exports carry the name only.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('workspace_secrets')
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('sealed_value', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('workspace_secrets_pk', ['workspace_id', 'name'])
    .execute();
}
