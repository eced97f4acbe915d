/**
 * The baseline the engine is measured against: a minimal job table and a claim-and-complete
 * loop with the same claim statement shape as the engine's (UPDATE … WHERE id IN (SELECT …
 * FOR UPDATE SKIP LOCKED) RETURNING), the same batch size, over the same Kysely store.
 * Completing a job is one fenced UPDATE. It does no work at all: it is what the store itself
 * costs per job.
 */
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../src/storage/connect.js';

// The raw table lives outside the app's typed schema.
type RawDb = Kysely<any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export async function createRawTable(db: RawDb): Promise<void> {
  await sql`drop table if exists raw_jobs`.execute(db);
  await sql`create table raw_jobs (id text primary key, status text not null, owner text, fence integer not null default 0, available_at text not null)`.execute(db);
  await sql`create index raw_jobs_claimable on raw_jobs (available_at) where status = 'pending'`.execute(db);
}

export async function fillRawJobs(db: RawDb, count: number): Promise<void> {
  const at = new Date(0).toISOString();
  for (let start = 0; start < count; start += 500) {
    const rows = Array.from({ length: Math.min(500, count - start) }, (_, i) => ({ id: `job-${start + i}`, status: 'pending', available_at: at }));
    await db.insertInto('raw_jobs').values(rows).execute();
  }
}

/** Claims and completes until nothing is left; answers how many jobs it completed. */
export async function rawWorkerLoop(db: RawDb, dialect: Dialect, owner: string, batch: number): Promise<number> {
  let done = 0;
  for (;;) {
    const now = new Date().toISOString();
    let due = db
      .selectFrom('raw_jobs')
      .select('id')
      .where(sql<boolean>`status = 'pending'`)
      .where('available_at', '<=', now)
      .orderBy('available_at')
      .limit(batch);
    if (dialect === 'postgres') due = due.forUpdate().skipLocked();
    const claimed: { id: string; fence: number }[] = await db
      .updateTable('raw_jobs')
      .set((eb) => ({ owner, fence: eb('fence', '+', 1), available_at: new Date(Date.now() + 30_000).toISOString() }))
      .where('id', 'in', due)
      .returning(['id', 'fence'])
      .execute();
    if (claimed.length === 0) return done;
    await Promise.all(
      claimed.map((job) =>
        db.updateTable('raw_jobs').set({ status: 'done' }).where('id', '=', job.id).where('fence', '=', job.fence).execute(),
      ),
    );
    done += claimed.length;
  }
}
