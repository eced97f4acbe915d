/** What a worker reads when a guarded write failed: why (paused, ended, lease lost, woken). */
import type { DbOrTx } from '../../storage/database.js';

export async function readRunLease(db: DbOrTx, runId: string) {
  return db
    .selectFrom('runs')
    .select(['automation_status', 'lease_owner', 'lease_fence', 'wake_seq'])
    .where('id', '=', runId)
    .executeTakeFirst();
}
