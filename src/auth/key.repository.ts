import type { DbOrTx } from '../storage/database.js';
import { hashApiKey } from './api-keys.js';
import type { KeyContext } from './context.js';
import { parseJson } from '../lib/json.js';

/** The live key for a presented secret, or null when unknown or revoked. Never cached. */
export async function findActiveKey(db: DbOrTx, presentedKey: string): Promise<KeyContext | null> {
  const row = await db
    .selectFrom('api_keys')
    .select(['id', 'tenant_id', 'workspace_id', 'name', 'scopes', 'environment'])
    .where('key_hash', '=', hashApiKey(presentedKey))
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  if (!row) return null;
  return {
    keyId: row.id,
    tenantId: row.tenant_id,
    workspaceId: row.workspace_id,
    keyName: row.name,
    scopes: parseJson<string[]>(row.scopes, []),
    environment: row.environment as KeyContext['environment'],
  };
}

export async function touchKeys(db: DbOrTx, keyIds: string[], at: string): Promise<void> {
  if (keyIds.length === 0) return;
  await db.updateTable('api_keys').set({ last_used_at: at }).where('id', 'in', keyIds).execute();
}
