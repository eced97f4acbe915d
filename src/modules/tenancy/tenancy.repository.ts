import type { DbOrTx } from '../../storage/database.js';
import { uuidv7 } from '../../lib/ids.js';
import { generateApiKey, hashApiKey } from '../../auth/api-keys.js';
import { parseJson } from '../../lib/json.js';

/**
 * Tenants, workspaces and keys: the access-request channel of the spec, used by `carepath admin`
 * and by the demo seed. Never reachable through the HTTP API.
 */
export async function ensureTenant(db: DbOrTx, name: string, at: string): Promise<string> {
  const existing = await db.selectFrom('tenants').select('id').where('name', '=', name).executeTakeFirst();
  if (existing) return existing.id;
  const id = uuidv7();
  await db.insertInto('tenants').values({ id, name, created_at: at }).onConflict((oc) => oc.column('name').doNothing()).execute();
  const row = await db.selectFrom('tenants').select('id').where('name', '=', name).executeTakeFirstOrThrow();
  return row.id;
}

export async function createWorkspace(db: DbOrTx, tenantId: string, name: string, at: string): Promise<string> {
  const id = uuidv7();
  await db.insertInto('workspaces').values({ id, tenant_id: tenantId, name, created_at: at }).execute();
  return id;
}

export async function findWorkspace(db: DbOrTx, workspaceId: string) {
  return db.selectFrom('workspaces').selectAll().where('id', '=', workspaceId).executeTakeFirst();
}

export async function findWorkspaceByName(db: DbOrTx, tenantId: string, name: string) {
  return db
    .selectFrom('workspaces')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('name', '=', name)
    .executeTakeFirst();
}

/** Every workspace with its tenant, by tenant name then workspace name (`--tenant` narrows to one). */
export async function listWorkspaces(db: DbOrTx, tenantName?: string) {
  let select = db
    .selectFrom('workspaces')
    .innerJoin('tenants', 'tenants.id', 'workspaces.tenant_id')
    .select(['workspaces.id as workspaceId', 'workspaces.name as name', 'tenants.id as tenantId', 'tenants.name as tenant', 'workspaces.created_at as createdAt'])
    .orderBy('tenants.name')
    .orderBy('workspaces.name');
  if (tenantName !== undefined) select = select.where('tenants.name', '=', tenantName);
  return select.execute();
}

export interface IssuedKey {
  keyId: string;
  key: string;
}

export async function issueKey(
  db: DbOrTx,
  workspace: { id: string; tenant_id: string },
  name: string,
  scopes: string[],
  environment: 'staging' | 'production',
  at: string,
): Promise<IssuedKey> {
  const key = generateApiKey(environment);
  const keyId = uuidv7();
  await db
    .insertInto('api_keys')
    .values({
      id: keyId,
      tenant_id: workspace.tenant_id,
      workspace_id: workspace.id,
      name,
      key_hash: hashApiKey(key),
      scopes: JSON.stringify(scopes),
      environment,
      created_at: at,
      revoked_at: null,
      last_used_at: null,
    })
    .execute();
  return { keyId, key };
}

/** Returns false when no such key exists; revoking twice keeps the first revocation time. */
/**
 * Revokes a key. Undefined when no key has the id; else the key's workspace and whether this call
 * revoked it (false: it was revoked already, and nothing changed).
 */
export async function revokeKey(
  db: DbOrTx,
  keyId: string,
  at: string,
): Promise<{ workspace: { id: string; tenant_id: string }; revokedNow: boolean } | undefined> {
  const row = await db.selectFrom('api_keys').select(['workspace_id', 'tenant_id', 'revoked_at']).where('id', '=', keyId).executeTakeFirst();
  if (!row) return undefined;
  if (!row.revoked_at) {
    await db.updateTable('api_keys').set({ revoked_at: at }).where('id', '=', keyId).execute();
  }
  return { workspace: { id: row.workspace_id, tenant_id: row.tenant_id }, revokedNow: !row.revoked_at };
}

export async function listKeys(db: DbOrTx, workspaceId: string) {
  const rows = await db
    .selectFrom('api_keys')
    .select(['id', 'name', 'scopes', 'environment', 'created_at', 'revoked_at', 'last_used_at'])
    .where('workspace_id', '=', workspaceId)
    .orderBy('id', 'asc')
    .execute();
  return rows.map((row) => ({
    keyId: row.id,
    name: row.name,
    scopes: parseJson<string[]>(row.scopes, []),
    environment: row.environment,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
    lastUsedAt: row.last_used_at,
  }));
}

export async function countTenants(db: DbOrTx): Promise<number> {
  const row = await db.selectFrom('tenants').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}
