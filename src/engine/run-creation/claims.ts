import type { DbOrTx } from '../../storage/database.js';
import type { CreateOutcome, PreparedRun } from '../run-creator.js';
import { ApiError } from '../../lib/errors.js';

/** The refusal of a key a workspace's earlier request (a fire or an evaluation) holds: DESIGN §4. */
export function keyHeldByAnotherRequest(): ApiError {
  return new ApiError('idempotency_mismatch', 'this Idempotency-Key was used with a different request; use a new key for a new request');
}

/**
 * The runs of a batch that try to claim their idempotency key: the first run of each key (a
 * later one with the same key is answered from the claim after the commit). Sorted by key so
 * that concurrent batches take key locks in one order and cannot deadlock.
 */
export function claimantsOf(runs: PreparedRun[]): number[] {
  const firstOfKey = new Map<string, number>();
  runs.forEach((run, i) => {
    if (!run.claim) return;
    const scopeKey = `${run.ctx.workspaceId}\u0000${run.claim.key}`;
    if (!firstOfKey.has(scopeKey)) firstOfKey.set(scopeKey, i);
  });
  return [...firstOfKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, i]) => i);
}

/** Runs not written in this batch read the claim that stands (earlier, another batch, or this one). */
export async function readStandingClaims(
  db: DbOrTx,
  runs: PreparedRun[],
  outcomes: (CreateOutcome | null)[],
): Promise<CreateOutcome[]> {
  for (let i = 0; i < runs.length; i++) {
    if (outcomes[i]) continue;
    const claim = await findClaim(db, runs[i].ctx.workspaceId, runs[i].claim!.key);
    if (!claim) throw new Error('an idempotency key claimed in this batch has no claim');
    outcomes[i] = claim;
  }
  return outcomes as CreateOutcome[];
}

/** The run an idempotency key of this workspace made, and the fingerprint of its request. */
export async function findClaim(db: DbOrTx, workspaceId: string, key: string): Promise<Extract<CreateOutcome, { kind: 'claimed-before' }> | undefined> {
  const row = await db
    .selectFrom('idempotency_keys')
    .select(['run_id', 'fingerprint', 'trigger_id'])
    .where('workspace_id', '=', workspaceId)
    .where('key', '=', key)
    .executeTakeFirst();
  return row && { kind: 'claimed-before', runId: row.run_id, fingerprint: row.fingerprint, triggerId: row.trigger_id };
}
