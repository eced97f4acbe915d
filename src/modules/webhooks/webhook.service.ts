/**
 * Managing webhook endpoints. An endpoint and its first secret are written in one transaction,
 * and the secret is handed out once, in the create answer. `auth` is fixed at creation: the
 * sending system is configured for one or the other. Deleting is soft (deliveries to the URL are
 * refused from then on) and ends every secret at once.
 */
import { claimCreateKey, type CreateKey } from '../idempotency/create-keys.js';
import type { Db } from '../../storage/database.js';
import type { RequestContext } from '../../auth/context.js';
import type { SecretBox } from '../../lib/secret-box.js';
import { invalidRequest, notFound } from '../../lib/errors.js';
import { uuidv7 } from '../../lib/ids.js';
import type { CreateWebhookBody, CreatedWebhook, UpdateWebhookBody, WebhookView } from './webhook.schemas.js';
import { findWebhook, insertWebhook, lockWebhook, toWebhookView, updateWebhook, type WebhookRow } from './webhook.repository.js';
import { expireSecrets, generateWebhookSecret, insertSecret, newSecretRow } from './webhook-secrets.js';
import { recordAudit } from '../audit/audit.repository.js';
import { setupCreated, setupDeleted, setupUpdated } from '../audit/setup-audit.js';

export interface WebhookDeps {
  db: Db;
  box: SecretBox;
  /** The deployment's public base address, for the endpoint's `url`. */
  publicUrl: string;
}

export async function createWebhook(
  deps: WebhookDeps,
  ctx: RequestContext,
  body: CreateWebhookBody,
  now: Date,
  createKey?: CreateKey,
): Promise<CreatedWebhook> {
  const at = now.toISOString();
  const auth = body.auth ?? 'signature';
  const row: WebhookRow = {
    id: uuidv7(now.getTime()),
    workspace_id: ctx.workspaceId,
    name: body.name,
    active: body.active === false ? 0 : 1,
    auth,
    created_at: at,
    updated_at: at,
    deleted_at: null,
  };
  const secret = generateWebhookSecret();
  const view = toWebhookView(row, deps.publicUrl);
  await deps.db.transaction().execute(async (tx) => {
    await claimCreateKey(tx, ctx.workspaceId, createKey, row.id, at);
    await insertWebhook(tx, row);
    await insertSecret(tx, newSecretRow(deps.box, row.id, auth, secret, now));
    // The view, not the answer: the secret is shown once, to the caller, and stored hashed or sealed only.
    await recordAudit(tx, ctx, at, [setupCreated('webhook', row.id, view)]);
  });
  return { ...view, secret };
}

export async function changeWebhook(
  deps: Pick<WebhookDeps, 'db' | 'publicUrl'>,
  ctx: RequestContext,
  webhookId: string,
  body: UpdateWebhookBody,
  now: Date,
): Promise<WebhookView> {
  const row = await findWebhook(deps.db, ctx.workspaceId, webhookId);
  if (!row) throw notFound('webhook endpoint');
  // Nothing to change: the endpoint as it is, not moved (`updatedAt`) and not audited as changed.
  if (Object.keys(body).length === 0) return toWebhookView(row, deps.publicUrl);
  if (body.secret !== undefined) {
    throw invalidRequest(
      `body.secret cannot be set through the API; rotate it with: carepath admin webhook rotate-secret ${webhookId} ` +
        '(it prints the new secret once; the old one keeps working for the overlap, 24 hours by default)',
    );
  }
  if (body.auth !== undefined) {
    throw invalidRequest('body.auth cannot be changed; create a new endpoint and point the sending system at it');
  }
  const changes: Partial<WebhookRow> = { updated_at: now.toISOString() };
  if (body.name !== undefined) changes.name = body.name;
  if (body.active !== undefined) changes.active = body.active ? 1 : 0;
  return deps.db.transaction().execute(async (tx) => {
    // Held, as it is now: one deleted meanwhile is a 404 (its row is not turned active again).
    const current = await lockWebhook(tx, ctx.workspaceId, webhookId);
    if (!current) throw notFound('webhook endpoint');
    const view = toWebhookView({ ...current, ...changes }, deps.publicUrl);
    await updateWebhook(tx, webhookId, changes);
    await recordAudit(tx, ctx, changes.updated_at!, [setupUpdated('webhook', webhookId, body, view)]);
    return view;
  });
}

export async function deleteWebhook(db: Db, ctx: RequestContext, webhookId: string, now: Date): Promise<void> {
  const at = now.toISOString();
  await db.transaction().execute(async (tx) => {
    const row = await findWebhook(tx, ctx.workspaceId, webhookId);
    if (!row) throw notFound('webhook endpoint');
    await updateWebhook(tx, webhookId, { deleted_at: at, updated_at: at, active: 0 });
    await expireSecrets(tx, webhookId, at);
    await recordAudit(tx, ctx, at, [setupDeleted('webhook', webhookId, row.name)]);
  });
}
