/**
 * Admin commands change who may do what (keys, webhook secrets) and what runs (blueprints), so
 * each change is audited like an API change (DESIGN §10), in the same transaction as the change.
 * The actor is the operator's shell: key name `carepath admin`, no key id, and a fresh request id
 * per command, so an export shows what an operator did and when.
 */
import type { RequestContext } from '../../auth/context.js';
import { uuidv7 } from '../../lib/ids.js';
import { recordAudit, type AuditInput } from '../../modules/audit/audit.repository.js';
import type { DbOrTx } from '../../storage/database.js';

export const ADMIN_ACTOR = 'carepath admin';

function adminContext(workspace: { id: string; tenant_id: string }, environment: 'staging' | 'production'): RequestContext {
  return {
    tenantId: workspace.tenant_id,
    workspaceId: workspace.id,
    keyId: '',
    keyName: ADMIN_ACTOR,
    scopes: [],
    environment,
    requestId: uuidv7(),
  };
}

/** Records one admin change (or an export of the trail); never pass a key, a secret or a hash in `details`. */
export async function auditAdminChange(
  db: DbOrTx,
  workspace: { id: string; tenant_id: string },
  environment: 'staging' | 'production',
  at: string,
  input: AuditInput,
): Promise<void> {
  await recordAudit(db, adminContext(workspace, environment), at, [input]);
}
