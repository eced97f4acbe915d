/**
 * Receiving a delivery (interface spec "Deliver data", DESIGN §4, §7): after the endpoint and
 * the signature check out, the body must be JSON of an accepted shape; then it is stored, and
 * only once it is stored does the caller get its 202. Processing happens later, elsewhere.
 *
 * Idempotency per endpoint, over the raw bytes: the same Idempotency-Key with the same body
 * answers the first 202 again and stores nothing; with another body it is 409.
 */
import type { Db } from '../../storage/database.js';
import { ApiError, invalidRequest } from '../../lib/errors.js';
import { uuidv7 } from '../../lib/ids.js';
import { sha256Hex } from '../../lib/json.js';
import { utf8TextOf } from '../../lib/utf8-text.js';
import { findEarlierDelivery, insertDelivery, insertDeliverySqlite, type DeliveryRow } from './delivery.repository.js';
import { sqliteDeliveryStatementsOf } from './sqlite-delivery-statements.js';
import { parsedHandoffFor } from './parsed-handoff.js';
import type { DeliveryEndpoint } from './delivery-endpoint.js';
import type { DeliveryRead, DeliveryReader } from './delivery-reader.js';

const IDEMPOTENCY_KEY = /^[\x20-\x7e]{1,255}$/;

export interface IntakeInput {
  rawBody: Buffer;
  /** the Idempotency-Key header as received (an array when it was sent twice) */
  idempotencyKey: string | string[] | undefined;
  /**
   * The `t` of the signature that proved it (null: a bearer endpoint, or a caller that checked
   * none). The same body signed at the same `t` is taken once, whatever key it carries: the
   * same request sent again is a replay, answered as one.
   */
  signedAt?: number | null;
  requestId: string;
  now: Date;
}

export interface IntakeResult {
  deliveryId: string;
  /** resources and records accepted for processing */
  accepted: number;
  idempotencyKey: string | null;
  /** true when an earlier delivery with this key and body is being answered again */
  replayed: boolean;
}

function idempotencyKeyOf(header: IntakeInput['idempotencyKey']): string | null {
  if (header === undefined) return null;
  if (typeof header !== 'string' || !IDEMPOTENCY_KEY.test(header)) {
    throw invalidRequest('Idempotency-Key must be one header of 1–255 printable ASCII characters');
  }
  return header;
}

function replayOf(
  stored: { id: string; body_sha256: string; accepted: number },
  bodySha256: string,
  key: string,
): IntakeResult {
  if (stored.body_sha256 !== bodySha256) {
    throw new ApiError(
      'idempotency_mismatch',
      'this Idempotency-Key was used for another body on this endpoint; use a new key for new data',
    );
  }
  return { deliveryId: stored.id, accepted: stored.accepted, idempotencyKey: key, replayed: true };
}

/**
 * Inserts the delivery (autocommit: stored once this returns). On SQLite through the prepared
 * statement, holding Kysely's one connection so the INSERT is not inside the processor's
 * transaction; elsewhere through Kysely.
 */
async function storeDelivery(db: Db, row: DeliveryRow): Promise<boolean> {
  const hot = sqliteDeliveryStatementsOf(db);
  if (!hot) return insertDelivery(db, row);
  return db.connection().execute(async () => insertDeliverySqlite(hot, row));
}

export async function receiveDelivery(db: Db, reader: DeliveryReader, endpoint: DeliveryEndpoint, input: IntakeInput): Promise<IntakeResult> {
  const key = idempotencyKeyOf(input.idempotencyKey);
  // A processor in this process: the delivery is stored already claimed for it, and takes the
  // read's digest from memory (parsed-handoff.ts); without one, only the shape is wanted here.
  const handoff = parsedHandoffFor(db);
  const claimant = handoff.claimant;
  const handingOver = handoff.active;
  let text: string;
  let read: DeliveryRead;
  let bodySha256: string | undefined;
  let accepted: number;
  try {
    // Bytes that are not UTF-8 are refused like a body of another shape: a replay first.
    text = utf8TextOf(input.rawBody);
    // Parsed and checked on the reader's thread while this one hashes the bytes.
    read = reader.read(text, { digest: handingOver });
    bodySha256 = sha256Hex(input.rawBody);
    // The 202 waits for the shape only: resources are checked against the FHIR schema after it
    // (the digest), so a large bundle is answered quickly and one bad entry does not refuse the rest.
    accepted = await read.shaped;
  } catch (error) {
    bodySha256 ??= sha256Hex(input.rawBody);
    // A replay is answered from what was stored, whatever this body is; a new key's bad body is 400.
    const stored = key === null ? undefined : await findEarlierDelivery(db, endpoint.id, { idempotencyKey: key });
    if (stored) return replayOf(stored, bodySha256, key!);
    throw error;
  }
  const at = input.now.toISOString();
  const deliveryId = uuidv7(input.now.getTime());
  const row: DeliveryRow = {
    id: deliveryId,
    tenant_id: endpoint.tenantId,
    workspace_id: endpoint.workspaceId,
    webhook_id: endpoint.id,
    request_id: input.requestId,
    idempotency_key: key,
    body_sha256: bodySha256,
    body: text,
    accepted,
    status: claimant ? 'processing' : 'received',
    attempts: claimant ? 1 : 0,
    lease_owner: claimant ? claimant.owner : null,
    lease_expires_at: claimant ? new Date(input.now.getTime() + claimant.leaseMs).toISOString() : null,
    received_at: at,
    processed_at: null,
    problems: '[]',
    problem_count: 0,
    events: '[]',
    runs_started: 0,
    error: null,
    pending_wakes: null,
    // Every signed delivery, with a key or without: the key is not covered by the signature, so
    // a copy of the request sent under another key is still the same request (a replay).
    signature_t: input.signedAt != null ? String(input.signedAt) : null,
  };
  const stored = await storeDelivery(db, row);
  if (stored) {
    // Stored (committed): a processor in this process may now use this read instead of the bytes.
    if (claimant) handoff.offerClaimed(row, read.digest(), input.rawBody.length);
    else if (handingOver) handoff.offer(deliveryId, read.digest(), input.rawBody.length);
    return { deliveryId, accepted, idempotencyKey: key, replayed: false };
  }

  // The key was used before (a replay), or a concurrent request with it won the insert; or this
  // very request (body and signature time) was taken before, under whatever key it carried then.
  const earlier = await earlierDeliveryOf(db, endpoint, key, row.signature_t, bodySha256);
  if (earlier) return earlier;
  throw new ApiError('internal', 'the delivery could not be stored');
}

/**
 * The answer of an earlier delivery this request repeats (by its Idempotency-Key, or as the same
 * signed request under any key), or undefined when it repeats none. An endpoint switched off
 * after a delivery still answers its retry with the first 202 (DESIGN §4: a replay answers the
 * first 202 again): the sender whose answer was lost is not told that stored data was refused.
 */
export async function replayedDelivery(db: Db, endpoint: DeliveryEndpoint, input: Pick<IntakeInput, 'rawBody' | 'idempotencyKey' | 'signedAt'>): Promise<IntakeResult | undefined> {
  const signatureT = input.signedAt != null ? String(input.signedAt) : null;
  return earlierDeliveryOf(db, endpoint, idempotencyKeyOf(input.idempotencyKey), signatureT, sha256Hex(input.rawBody));
}

async function earlierDeliveryOf(
  db: Db,
  endpoint: DeliveryEndpoint,
  key: string | null,
  signatureT: string | null,
  bodySha256: string,
): Promise<IntakeResult | undefined> {
  if (key !== null) {
    const winner = await findEarlierDelivery(db, endpoint.id, { idempotencyKey: key });
    if (winner) return replayOf(winner, bodySha256, key);
  }
  if (signatureT !== null) {
    const first = await findEarlierDelivery(db, endpoint.id, { signatureT, bodySha256 });
    if (first) return { deliveryId: first.id, accepted: first.accepted, idempotencyKey: first.idempotency_key, replayed: true };
  }
  return undefined;
}
