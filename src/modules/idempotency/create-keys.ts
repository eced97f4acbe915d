/**
 * `Idempotency-Key` on the creates of set-up resources (triggers, saved queries, webhook
 * endpoints), as on fires: a provisioning script that sends `POST /v1/triggers` again after a
 * timeout must not make a second event trigger, which would start two runs for every event.
 *
 * The key is the workspace's, in the table fires and evaluations claim theirs in
 * (`idempotency_keys`), so a key names one request whatever it was: used before by a fire, an
 * evaluation or another create (another kind, or another body), it is 409
 * `idempotency_mismatch`. The claim is written in the create's own transaction, before its
 * rows: a concurrent create with the same key waits for it (PostgreSQL: the key's row; SQLite:
 * the write lock), then finds it and answers what it made. A create that fails claims nothing.
 */
import type { DbOrTx } from '../../storage/database.js';
import { canonicalJson, sha256Hex } from '../../lib/json.js';
import { keyHeldByAnotherRequest } from '../../engine/run-creation/claims.js';
import { requireValidIdempotencyKey } from '../triggers/fire.service.js';

export type CreatedKind = 'trigger' | 'query' | 'webhook';

/** A create's key and the fingerprint of its request (its kind and its body, as sent). */
export interface CreateKey {
  key: string;
  fingerprint: string;
}

export function createKeyOf(kind: CreatedKind, key: string | undefined, body: unknown): CreateKey | undefined {
  requireValidIdempotencyKey(key);
  return key === undefined ? undefined : { key, fingerprint: `create:${kind}:${sha256Hex(canonicalJson(body))}` };
}

/** The same key and body came before: the create answers what that one made, and makes nothing. */
export class CreateReplayed extends Error {
  constructor(readonly madeId: string) {
    super('an earlier request with this Idempotency-Key made it');
  }
}

/**
 * What the same request made before (its key's claim, with this request's fingerprint), read
 * before the create's checks; 409 when the key names another request; undefined when the key is
 * new (or none was sent). The claim in the create's transaction settles the race with a
 * concurrent retry.
 */
export async function earlierCreate(db: DbOrTx, workspaceId: string, createKey: CreateKey | undefined): Promise<string | undefined> {
  if (!createKey) return undefined;
  const claim = await claimOf(db, workspaceId, createKey.key);
  return claim ? madeBySameRequest(claim, createKey) : undefined;
}

function claimOf(db: DbOrTx, workspaceId: string, key: string) {
  return db.selectFrom('idempotency_keys').select(['fingerprint', 'made_id']).where('workspace_id', '=', workspaceId).where('key', '=', key).executeTakeFirst();
}

/** What the claim's request made, when it was this very request (same kind and body); else 409. */
function madeBySameRequest(claim: { fingerprint: string; made_id: string | null } | undefined, createKey: CreateKey): string {
  if (claim?.fingerprint !== createKey.fingerprint || !claim.made_id) throw keyHeldByAnotherRequest();
  return claim.made_id;
}

/**
 * Claims the key for what this create makes (`madeId`), inside the create's transaction and
 * before its rows. Throws CreateReplayed (the transaction is rolled back, nothing is made) when
 * the same request made something before, and 409 when the key names another request.
 */
export async function claimCreateKey(tx: DbOrTx, workspaceId: string, createKey: CreateKey | undefined, madeId: string, at: string): Promise<void> {
  if (!createKey) return;
  const inserted = await tx
    .insertInto('idempotency_keys')
    .values({ workspace_id: workspaceId, key: createKey.key, fingerprint: createKey.fingerprint, trigger_id: '', run_id: '', made_id: madeId, created_at: at })
    .onConflict((conflict) => conflict.columns(['workspace_id', 'key']).doNothing())
    .executeTakeFirst();
  if (Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0) return;
  throw new CreateReplayed(madeBySameRequest(await claimOf(tx, workspaceId, createKey.key), createKey));
}
