/**
 * The secrets of webhook endpoints (DESIGN §7), one row each in `webhook_secrets`:
 *
 * - `secret_hash`: SHA-256 hex of the secret, always. A bearer endpoint needs nothing more: the
 *   presented token is hashed and compared.
 * - `sealed_secret`: the secret itself, sealed by the secret box, for signature endpoints only,
 *   because checking an HMAC needs the key. Null for bearer endpoints.
 * - `expires_at`: null while current. A rotation gives the old rows an expiry, so senders can
 *   switch over while both secrets verify; after it they stop verifying.
 */
import { holding } from '../../storage/row-lock.js';
import { randomBytes } from 'node:crypto';
import type { Db, DbOrTx, WebhookSecretTable } from '../../storage/database.js';
import type { SecretBox } from '../../lib/secret-box.js';
import { invalidRequest, notFound } from '../../lib/errors.js';
import { uuidv7 } from '../../lib/ids.js';
import { sha256Hex } from '../../lib/json.js';
import { findLiveWebhookById } from './webhook.repository.js';
import type { WebhookAuth } from './webhook.schemas.js';

/** `whsec_` + 32 random bytes, base64url: 256 bits, and recognisable to secret scanners. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

export function hashWebhookSecret(secret: string): string {
  return sha256Hex(secret);
}

export function newSecretRow(box: SecretBox, webhookId: string, auth: WebhookAuth, secret: string, at: Date): WebhookSecretTable {
  return {
    id: uuidv7(at.getTime()),
    webhook_id: webhookId,
    sealed_secret: auth === 'signature' ? box.seal(secret) : null,
    secret_hash: hashWebhookSecret(secret),
    created_at: at.toISOString(),
    expires_at: null,
  };
}

export async function insertSecret(db: DbOrTx, row: WebhookSecretTable): Promise<void> {
  await db.insertInto('webhook_secrets').values(row).execute();
}

export interface ActiveSecret {
  id: string;
  secretHash: string;
  /** The opened secret (signature endpoints); null for bearer endpoints, which keep only the hash. */
  secret: string | null;
  expiresAt: string | null;
}

/** The secrets of an endpoint that still verify at `now`, newest first. */
export async function activeSecretsOf(db: DbOrTx, box: SecretBox, webhookId: string, now: Date): Promise<ActiveSecret[]> {
  const at = now.toISOString();
  const rows = await db
    .selectFrom('webhook_secrets')
    .select(['id', 'sealed_secret', 'secret_hash', 'expires_at'])
    .where('webhook_id', '=', webhookId)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', at)]))
    .orderBy('id', 'desc')
    .execute();
  return openSecrets(box, rows, now);
}

export type SecretRow = Pick<WebhookSecretTable, 'id' | 'sealed_secret' | 'secret_hash' | 'expires_at'>;

/**
 * Of an endpoint's secret rows (read by whoever read the endpoint, delivery-endpoint.ts), the
 * ones that still verify at `now`, opened, newest first: the same answer as `activeSecretsOf`.
 */
export function openSecrets(box: SecretBox, rows: readonly SecretRow[], now: Date): ActiveSecret[] {
  const at = now.toISOString();
  return rows
    .filter((row) => row.expires_at === null || row.expires_at > at)
    .sort(descendingBy((row) => row.id))
    .map((row) => opened(box, row));
}

/**
 * The secret of an endpoint that stopped verifying last by `now` (rotated out), opened; none
 * when no secret stopped yet: only to tell a sender still using it what is wrong
 * (delivery-endpoint.ts). The last one only, not every secret the endpoint ever had: each is
 * checked with an HMAC over the whole refused body (up to 20 MiB, about 17 ms on the serving
 * thread) for anyone who knows the endpoint's URL, and the work of a refusal grew with every
 * rotation (a security review, 2026-11-28). A sender on a secret retired before it is told
 * that no signature matches.
 */
export function retiredSecrets(box: SecretBox, rows: readonly SecretRow[], now: Date): ActiveSecret[] {
  const at = now.toISOString();
  return rows
    .filter((row) => row.expires_at !== null && row.expires_at <= at)
    // A rotation with no overlap ends the secret it replaces and any older one at the same
    // instant: of those, the newest row is the one retired last.
    .sort((a, b) => descendingBy((row) => row.expires_at!)(a, b) || descendingBy((row) => row.id)(a, b))
    .slice(0, 1)
    .map((row) => opened(box, row));
}

function opened(box: SecretBox, row: SecretRow): ActiveSecret {
  return { id: row.id, secretHash: row.secret_hash, secret: row.sealed_secret === null ? null : box.open(row.sealed_secret), expiresAt: row.expires_at };
}

function descendingBy(key: (row: SecretRow) => string): (a: SecretRow, b: SecretRow) => number {
  return (a, b) => (key(a) < key(b) ? 1 : key(a) > key(b) ? -1 : 0);
}

/** Makes every secret of the endpoint stop verifying at `at`, or earlier if it already would. */
export async function expireSecrets(db: DbOrTx, webhookId: string, at: string): Promise<void> {
  await db
    .updateTable('webhook_secrets')
    .set({ expires_at: at })
    .where('webhook_id', '=', webhookId)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', at)]))
    .execute();
}

/**
 * Gives a live endpoint a new secret and returns it (shown once). The secret it replaces keeps
 * verifying for `overlapMs` (0 = not at all); any older one stops now. The URL stays.
 */
export async function rotateSecret(
  db: Db,
  box: SecretBox,
  webhookId: string,
  overlapMs: number,
  now: Date,
  /** Runs in the rotation's transaction (the admin command audits there). */
  onRotated?: (tx: DbOrTx, webhook: { id: string; workspace_id: string }) => Promise<void>,
): Promise<string> {
  if (!Number.isFinite(overlapMs) || overlapMs < 0) throw invalidRequest('the overlap must be zero or more milliseconds');
  return db.transaction().execute(async (tx) => {
    // Held until the rotation commits (PostgreSQL): two rotations at once could each expire the
    // secrets they saw and both leave a new one without an end.
    await holding(tx, tx.selectFrom('webhooks').select('id').where('id', '=', webhookId)).execute();
    const webhook = await findLiveWebhookById(tx, webhookId);
    if (!webhook) throw notFound('webhook endpoint');
    // Only the secret just replaced keeps verifying for the overlap: one retired by an earlier
    // rotation ends now (it kept its own overlap, and a secret rotated away because it leaked
    // stayed valid through a second rotation meant to end it: a lifecycle review).
    const at = now.toISOString();
    await tx
      .updateTable('webhook_secrets')
      .set({ expires_at: at })
      .where('webhook_id', '=', webhookId)
      .where('expires_at', 'is not', null)
      .where('expires_at', '>', at)
      .execute();
    await expireSecrets(tx, webhookId, new Date(now.getTime() + overlapMs).toISOString());
    const secret = generateWebhookSecret();
    await insertSecret(tx, newSecretRow(box, webhookId, webhook.auth as WebhookAuth, secret, now));
    await onRotated?.(tx, webhook);
    return secret;
  });
}
