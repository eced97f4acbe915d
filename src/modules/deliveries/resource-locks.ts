/**
 * PostgreSQL: the stored rows a group of deliveries may change, locked before any of them is
 * read. Processors in several processes apply deliveries at once there, and two deliveries about
 * one resource (an update and a deletion of a Patient, sent together) each read its state and its
 * record, then wrote over the other: the update's tags landed on a record the deletion had just
 * removed, and its state said the Patient existed while search had no record of it (a review:
 * 12 Patients in 200 such pairs, over 2 api processes and a worker). Locked first, the second
 * delivery waits for the first to commit and then reads what it wrote, as on SQLite, whose
 * transactions take the one write lock as they begin.
 *
 * Locked, per workspace in one fixed order: first, for the resources not stored yet (no row to
 * lock), an advisory lock per bucket of keys (NEW_RESOURCE_BUCKETS, in bucket order); then the
 * resource states of every resource the group touches, then the records of its Patients and
 * Practitioners (a record can exist without a state: a stand-in), each in one statement, keys in
 * one fixed order. Without the buckets two deliveries creating the same resource both saw it
 * new, and both raised `.created` (a verification round: every run of a `Patient.created`
 * trigger started twice). Buckets keep the number of locks a transaction holds bounded
 * (PostgreSQL's lock table is shared and small); two deliveries of new resources that share a
 * bucket apply one after the other.
 *
 * Buckets come first so that no group waits for a bucket while it holds rows: taken after the
 * states (as they were), a group holding its states waited for a bucket whose holder, the next
 * part of an overlapping large delivery, had just locked a state it wanted: a deadlock (a
 * verification round: 2 in 4 rounds of six overlapping 8,000-item deliveries). A resource
 * deleted between the first look and the row locks is new again without its bucket: its bucket
 * is taken last, the one case where a group still waits holding rows.
 */
import { sql } from 'kysely';
import type { DbOrTx } from '../../storage/database.js';
import { splitKey } from '../../ingestion/resource-changes.js';
import { keyRows, lockStoredResources } from '../records/record-locks.js';

/** `touched`: per workspace, the state keys (`stateKey`) its deliveries in this group touch. */
export async function lockTouchedResources(tx: DbOrTx, touched: ReadonlyMap<string, ReadonlySet<string>>): Promise<void> {
  for (const workspaceId of [...touched.keys()].sort()) {
    const keys = [...touched.get(workspaceId)!].map(splitKey);
    await lockNewResources(tx, workspaceId, keys);
    await lockStoredResources(tx, workspaceId, keys);
    // Buckets held already are taken again at no cost; only a resource deleted meanwhile adds one.
    await lockNewResources(tx, workspaceId, keys);
  }
}

/** Advisory lock buckets for resources not stored yet, under a class of their own. */
const NEW_RESOURCE_LOCK_CLASS = 0x63706e72;
const NEW_RESOURCE_BUCKETS = 1024;

/** Locks the buckets of the keys that have no state yet. */
async function lockNewResources(tx: DbOrTx, workspaceId: string, keys: readonly [string, string][]): Promise<void> {
  if (keys.length === 0) return;
  // The stored state is looked up key by key (a lateral LIMIT 1 the planner cannot turn into a
  // join over the whole table; see records/record-locks.ts).
  await sql`
    select pg_advisory_xact_lock(${NEW_RESOURCE_LOCK_CLASS}, b.bucket), b.bucket
    from (
      select distinct (hashtext(${workspaceId} || '/' || k.t || '/' || k.i) & ${NEW_RESOURCE_BUCKETS - 1}) as bucket
      from ${keyRows(keys)}
      left join lateral (
        select 1 as stored from resource_states s
        where s.workspace_id = ${workspaceId} and s.resource_type = k.t and s.resource_id = k.i limit 1
      ) f on true
      where f.stored is null
      order by 1
    ) b`.execute(tx);
}

