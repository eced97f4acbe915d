/**
 * The endpoint a delivery is posted to, and whether the request proves it knows the endpoint's
 * secret: an HMAC signature (the default) or, for endpoints created with `auth: "bearer"`, the
 * secret itself as a bearer token. Secrets come from the webhook module (two are active during
 * a rotation overlap); the checks themselves are the pure functions of `ingestion/`.
 */
import type { DbOrTx } from '../../storage/database.js';
import { runHot, type HotStatement } from '../../storage/hot-statement.js';
import type { SecretBox } from '../../lib/secret-box.js';
import { ApiError } from '../../lib/errors.js';
import { isUuid } from '../../lib/ids.js';
import { openSecrets, retiredSecrets, type SecretRow } from '../webhooks/webhook-secrets.js';
import { SIGNATURE_TOLERANCE_SECONDS, verifySignature, type SignatureFailureReason } from '../../ingestion/signature.js';
import { verifyBearer } from '../../ingestion/bearer.js';

export interface DeliveryEndpoint {
  id: string;
  workspaceId: string;
  tenantId: string;
  active: boolean;
  auth: 'signature' | 'bearer';
  /** its secret rows, read with it (expired ones included: `checkDeliveryCredentials` picks by time) */
  secrets: SecretRow[];
}

/**
 * A live (not deleted) endpoint by id, with its tenant and its secrets; undefined for unknown or
 * deleted ones. One statement (a left join on the secrets) instead of one for the endpoint and
 * one for its secrets: a POST reads the store once before its INSERT.
 */
export async function findDeliveryEndpoint(db: DbOrTx, webhookId: string): Promise<DeliveryEndpoint | undefined> {
  if (!isUuid(webhookId)) return undefined;
  // Read before the route's validation, which lower-cases ids everywhere else (an EHR may
  // keep the endpoint's URL with its id in upper case).
  const rows = await selectEndpointRows(db, webhookId.toLowerCase());
  const [row] = rows;
  if (!row) return undefined;
  const secrets: SecretRow[] = [];
  for (const r of rows) {
    if (r.secret_id !== null && r.secret_hash !== null) {
      secrets.push({ id: r.secret_id, sealed_secret: r.sealed_secret, secret_hash: r.secret_hash, expires_at: r.expires_at });
    }
  }
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    tenantId: row.tenant_id,
    active: row.active === 1,
    auth: row.auth === 'bearer' ? 'bearer' : 'signature',
    secrets,
  };
}

interface EndpointRow {
  id: string;
  workspace_id: string;
  tenant_id: string;
  active: number;
  auth: string;
  secret_id: string | null;
  sealed_secret: string | null;
  secret_hash: string | null;
  expires_at: string | null;
}

/**
 * One row per secret (a left join: an endpoint without secrets is one row of nulls). Every POST
 * runs it, so it runs prepared (storage/hot-statement.ts).
 */
const ENDPOINT_ROWS = (parameter: string) => `
  select w.id, w.workspace_id, ws.tenant_id, w.active, w.auth,
         s.id as secret_id, s.sealed_secret, s.secret_hash, s.expires_at
  from webhooks w
  join workspaces ws on ws.id = w.workspace_id
  left join webhook_secrets s on s.webhook_id = w.id
  where w.id = ${parameter} and w.deleted_at is null`;
const ENDPOINT_STATEMENT: HotStatement = { name: 'carepath_delivery_endpoint_v1', sqlite: ENDPOINT_ROWS('?'), postgres: ENDPOINT_ROWS('$1') };

function selectEndpointRows(db: DbOrTx, webhookId: string): Promise<EndpointRow[]> {
  return runHot<EndpointRow>(db, ENDPOINT_STATEMENT, () => [webhookId]);
}

/** What the sender is told for each way a signature can be wrong: all of it is theirs to know. */
const SIGNATURE_MESSAGES: Record<SignatureFailureReason, string> = {
  missing_header: 'X-Service-Signature is missing; send t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">',
  malformed_header: 'X-Service-Signature is malformed (sent twice, t given twice, too long or too many v1 values)',
  missing_timestamp: 'X-Service-Signature has no t=<unix seconds> element',
  // Date.now() (milliseconds) is the usual slip of a JavaScript sender: say it, not only "seconds".
  invalid_timestamp: 'X-Service-Signature t must be whole Unix seconds, as date +%s prints them (not milliseconds: in JavaScript Math.floor(Date.now() / 1000))',
  missing_v1: 'X-Service-Signature has no v1 signature',
  malformed_v1: 'X-Service-Signature v1 must be the HMAC-SHA256 as 64 lower-case hex characters (not base64, not upper case)',
  no_matching_signature:
    "no v1 signature matches this body under the endpoint's secret (the HMAC key is the whole secret, whsec_ included, as UTF-8 text; " +
    'the message is "<t>." followed by the exact bytes of the body sent)',
  timestamp_outside_window: `X-Service-Signature t is more than ${SIGNATURE_TOLERANCE_SECONDS} seconds from the current time; sign with the current time`,
};

export interface PresentedCredentials {
  signature: string | string[] | undefined;
  authorization: string | string[] | undefined;
}

/**
 * Throws `invalid_signature` or `signature_expired` unless the request proves the secret.
 * Answers the signature's `t` (null for a bearer endpoint): a delivery is taken once per `t`.
 */
export async function checkDeliveryCredentials(
  deps: { db: DbOrTx; box: SecretBox },
  endpoint: DeliveryEndpoint,
  presented: PresentedCredentials,
  rawBody: Buffer,
  now: Date,
): Promise<{ signedAt: number | null }> {
  // The secrets came with the endpoint (findDeliveryEndpoint); `deps.db` is no longer read here.
  const secrets = openSecrets(deps.box, endpoint.secrets, now);
  const nowSeconds = Math.floor(now.getTime() / 1000);
  if (endpoint.auth === 'bearer') {
    const check = verifyBearer(presented.authorization, secrets.map((secret) => secret.secretHash));
    if (check.ok) return { signedAt: null };
    const stale = retiredSecrets(deps.box, endpoint.secrets, now).find((old) => verifyBearer(presented.authorization, [old.secretHash]).ok);
    throw new ApiError('invalid_signature', stale ? rotatedOut('the bearer secret is one', stale) : 'missing or invalid bearer secret; send Authorization: Bearer <endpoint secret>');
  }
  const keys = secrets.flatMap((secret) => (secret.secret === null ? [] : [secret.secret]));
  const check = verifySignature(presented.signature, rawBody, keys, nowSeconds);
  if (check.ok) return { signedAt: check.timestamp };
  if (check.reason === 'no_matching_signature') {
    // Made with a secret this endpoint had: after a rotation's overlap, "no signature matches"
    // read like a wrong secret or a changed body (a newcomer's walkthrough).
    const stale = retiredSecrets(deps.box, endpoint.secrets, now).find(
      (old) => old.secret !== null && verifySignature(presented.signature, rawBody, [old.secret], nowSeconds, SIGNED_BY_RETIRED_WITHIN_S).ok,
    );
    if (stale) throw new ApiError('invalid_signature', rotatedOut('X-Service-Signature was made with a secret', stale));
  }
  throw new ApiError(check.code, check.skewSeconds === undefined ? SIGNATURE_MESSAGES[check.reason] : expiredMessage(check.skewSeconds));
}

/**
 * How far off, and which way: told only to a sender whose signature matched. A `t` far behind
 * is a replayed request or a sender's clock running late; far ahead, a clock running early (NTP).
 */
function expiredMessage(skewSeconds: number): string {
  const way = skewSeconds < 0 ? 'behind' : 'ahead of';
  return `X-Service-Signature t is ${Math.abs(skewSeconds)} seconds ${way} this service's clock (at most ${SIGNATURE_TOLERANCE_SECONDS} are accepted); sign with the current time, and check the sending machine's clock (NTP)`;
}

/** A signature by a rotated-out secret is named as such whatever its `t` (within ten years). */
const SIGNED_BY_RETIRED_WITHIN_S = 10 * 366 * 86_400;

function rotatedOut(what: string, secret: { expiresAt: string | null }): string {
  return `${what} this endpoint stopped accepting at ${secret.expiresAt} (the secret was rotated); use the endpoint's current secret`;
}
