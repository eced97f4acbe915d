import type { DbOrTx, WebhookTable } from '../../storage/database.js';
import { holding } from '../../storage/row-lock.js';
import { newestFirstPage, type Page } from '../../lib/cursor.js';
import type { WebhookAuth, WebhookView } from './webhook.schemas.js';

export type WebhookRow = WebhookTable;

/** The inbound URL handed out: the delivery route, under the deployment's public address. */
export function webhookUrl(publicUrl: string, webhookId: string): string {
  return `${publicUrl}/v1/webhooks/${webhookId}`;
}

export function toWebhookView(row: WebhookRow, publicUrl: string): WebhookView {
  return {
    webhookId: row.id,
    name: row.name,
    url: webhookUrl(publicUrl, row.id),
    active: row.active === 1,
    auth: row.auth as WebhookAuth,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** A live (not deleted) endpoint of the workspace. */
export async function findWebhook(db: DbOrTx, workspaceId: string, webhookId: string): Promise<WebhookRow | undefined> {
  return db
    .selectFrom('webhooks')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', webhookId)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}

/** The live endpoint, held until the transaction ends (storage/row-lock.ts). */
export async function lockWebhook(tx: DbOrTx, workspaceId: string, webhookId: string): Promise<WebhookRow | undefined> {
  const select = tx.selectFrom('webhooks').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', webhookId).where('deleted_at', 'is', null);
  return holding(tx, select).executeTakeFirst();
}

/**
 * A live endpoint by id alone. Deliveries carry no API key, so the endpoint's id is what names
 * its workspace; the admin CLI works across workspaces too.
 */
export async function findLiveWebhookById(db: DbOrTx, webhookId: string): Promise<WebhookRow | undefined> {
  return db.selectFrom('webhooks').selectAll().where('id', '=', webhookId).where('deleted_at', 'is', null).executeTakeFirst();
}

export async function insertWebhook(db: DbOrTx, row: WebhookRow): Promise<void> {
  await db.insertInto('webhooks').values(row).execute();
}

export async function updateWebhook(db: DbOrTx, webhookId: string, changes: Partial<WebhookRow>): Promise<void> {
  await db.updateTable('webhooks').set(changes).where('id', '=', webhookId).execute();
}

/**
 * Live endpoints of the workspace, newest first: every one, or with `limit` a page of them (the
 * spec's list is a bare array; the route says where the next page starts).
 */
export async function listWebhooks(db: DbOrTx, workspaceId: string, page: { limit?: number; cursor?: string } = {}): Promise<Page<WebhookRow>> {
  const select = db.selectFrom('webhooks').selectAll().where('workspace_id', '=', workspaceId).where('deleted_at', 'is', null);
  return newestFirstPage(select, page, (row) => row, 'webhooks');
}
