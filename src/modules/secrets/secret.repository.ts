/**
 * The `workspace_secrets` table: set (insert or replace), list (names and times, never values),
 * delete, and read the values a call needs. Values are sealed with the deployment's secret box
 * (CAREPATH_SECRET_KEY), as webhook secrets are; without a key they are stored readable, as the
 * box does for a first try on a laptop, and production refuses to start without one.
 */
import type { DbOrTx } from '../../storage/database.js';
import type { SecretBox } from '../../lib/secret-box.js';

export interface SecretListing {
  name: string;
  createdAt: string;
  updatedAt: string;
}

/** Answers true when the name was new in the workspace, false when its value was replaced. */
export async function setSecret(db: DbOrTx, box: SecretBox, workspaceId: string, name: string, value: string, at: string): Promise<boolean> {
  const sealed = box.seal(value);
  const replaced = await db
    .updateTable('workspace_secrets')
    .set({ sealed_value: sealed, updated_at: at })
    .where('workspace_id', '=', workspaceId)
    .where('name', '=', name)
    .executeTakeFirst();
  if (Number(replaced.numUpdatedRows) > 0) return false;
  await db
    .insertInto('workspace_secrets')
    .values({ workspace_id: workspaceId, name, sealed_value: sealed, created_at: at, updated_at: at })
    .onConflict((oc) => oc.columns(['workspace_id', 'name']).doUpdateSet({ sealed_value: sealed, updated_at: at }))
    .execute();
  return true;
}

export async function listSecrets(db: DbOrTx, workspaceId: string): Promise<SecretListing[]> {
  const rows = await db
    .selectFrom('workspace_secrets')
    .select(['name', 'created_at', 'updated_at'])
    .where('workspace_id', '=', workspaceId)
    .orderBy('name')
    .execute();
  return rows.map((row) => ({ name: row.name, createdAt: row.created_at, updatedAt: row.updated_at }));
}

/** Answers false when the workspace has no secret of that name. */
export async function deleteSecret(db: DbOrTx, workspaceId: string, name: string): Promise<boolean> {
  const result = await db.deleteFrom('workspace_secrets').where('workspace_id', '=', workspaceId).where('name', '=', name).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/** The values of `names` that the workspace has; a missing name is simply absent from the map. */
export async function readSecrets(db: DbOrTx, box: SecretBox, workspaceId: string, names: readonly string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const rows = await db
    .selectFrom('workspace_secrets')
    .select(['name', 'sealed_value'])
    .where('workspace_id', '=', workspaceId)
    .where('name', 'in', [...names])
    .execute();
  return new Map(rows.map((row) => [row.name, box.open(row.sealed_value)]));
}
