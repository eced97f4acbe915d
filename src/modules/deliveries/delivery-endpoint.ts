/**
 * The endpoint a delivery is posted to, and whether the request proves it knows the endpoint's
 * secret: an HMAC signature (the default) or, for endpoints created with `auth: "bearer"`, the
 * secret itself as a bearer token. Secrets come from the webhook module (two are active during
 * a rotation overlap); the checks themselves are the pure functions of `ingestion/`.
 */
import type { DbOrTx } from '../../storage/database.js';
import type { SecretBox } from '../../lib/secret-box.js';
import { ApiError } from '../../lib/errors.js';
import { isUuid } from '../../lib/ids.js';
import { activeSecretsOf } from '../webhooks/webhook-secrets.js';
import { verifySignature, type SignatureFailureReason } from '../../ingestion/signature.js';
import { verifyBearer } from '../../ingestion/bearer.js';

export interface DeliveryEndpoint {
  id: string;
  workspaceId: string;
  tenantId: string;
  active: boolean;
  auth: 'signature' | 'bearer';
}

/** A live (not deleted) endpoint by id, with its tenant; undefined for unknown or deleted ones. */
export async function findDeliveryEndpoint(db: DbOrTx, webhookId: string): Promise<DeliveryEndpoint | undefined> {
  if (!isUuid(webhookId)) return undefined;
  const row = await db
    .selectFrom('webhooks')
    .innerJoin('workspaces', 'workspaces.id', 'webhooks.workspace_id')
    .select(['webhooks.id', 'webhooks.workspace_id', 'workspaces.tenant_id', 'webhooks.active', 'webhooks.auth'])
    .where('webhooks.id', '=', webhookId)
    .where('webhooks.deleted_at', 'is', null)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    tenantId: row.tenant_id,
    active: row.active === 1,
    auth: row.auth === 'bearer' ? 'bearer' : 'signature',
  };
}

/** What the sender is told for each way a signature can be wrong: all of it is theirs to know. */
const SIGNATURE_MESSAGES: Record<SignatureFailureReason, string> = {
  missing_header: 'X-Service-Signature is missing; send t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">',
  malformed_header: 'X-Service-Signature is malformed (sent twice, t given twice, too long or too many v1 values)',
  missing_timestamp: 'X-Service-Signature has no t=<unix seconds> element',
  invalid_timestamp: 'X-Service-Signature t must be whole Unix seconds',
  missing_v1: 'X-Service-Signature has no v1 signature',
  no_matching_signature: "no v1 signature matches this body under the endpoint's secret",
  timestamp_outside_window: 'X-Service-Signature t is more than 300 seconds from the current time; sign with the current time',
};

export interface PresentedCredentials {
  signature: string | string[] | undefined;
  authorization: string | string[] | undefined;
}

/** Throws `invalid_signature` or `signature_expired` unless the request proves the secret. */
export async function checkDeliveryCredentials(
  deps: { db: DbOrTx; box: SecretBox },
  endpoint: DeliveryEndpoint,
  presented: PresentedCredentials,
  rawBody: Buffer,
  now: Date,
): Promise<void> {
  const secrets = await activeSecretsOf(deps.db, deps.box, endpoint.id, now);
  if (endpoint.auth === 'bearer') {
    const check = verifyBearer(presented.authorization, secrets.map((secret) => secret.secretHash));
    if (!check.ok) throw new ApiError('invalid_signature', 'missing or invalid bearer secret; send Authorization: Bearer <endpoint secret>');
    return;
  }
  const keys = secrets.flatMap((secret) => (secret.secret === null ? [] : [secret.secret]));
  const check = verifySignature(presented.signature, rawBody, keys, Math.floor(now.getTime() / 1000));
  if (!check.ok) throw new ApiError(check.code, SIGNATURE_MESSAGES[check.reason]);
}
