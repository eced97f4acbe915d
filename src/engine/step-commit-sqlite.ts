/**
 * A batch of plain step writes (step-write.ts: rows only, no effect) committed on SQLite
 * synchronously, through better-sqlite3 statements prepared once per connection: one IMMEDIATE
 * transaction of single-row statements, while Kysely's lock on the one serving connection is held
 * (`db.connection()`), so no other caller's statements can interleave with them.
 *
 * Why: through Kysely every statement of the group commit was an asynchronous round of its own
 * (the connection's lock, promises, the driver's statement cache looked up by a text of several
 * KiB), and its texts were built per batch size. A one-node run on SQLite spent more CPU around
 * its SQL than in it (--cpu-prof, src/engine/README.md "Decisions"). On SQLite a prepared
 * single-row statement run n times inside one transaction does the same B-tree work as one n-row
 * statement (run-creation/batch-writer-sqlite.ts measured the same for new runs).
 *
 * Each run's guarded UPDATE sets only the columns its move changes: a step of a run that stays
 * `running` does not rewrite the status columns, so SQLite leaves the three indexes on
 * `automation_status` alone (it maintains every index on an assigned column, changed or not).
 *
 * Same guarantees as the transaction (step-committer.ts `commitWrites`): each run's rows are
 * written only when its own guard holds (lease at its fence, and the status its worker knows),
 * and everything commits together or not at all (an error rolls the whole batch back).
 *
 * IMMEDIATE: the serving connection need not be the only writer (a `carepath admin` command,
 * say, writes the same file); a transaction that takes the write lock up front waits for it
 * instead of failing on a stale snapshot.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { Db } from '../storage/database.js';
import { weakMemo } from '../lib/weak-memo.js';
import type { RunStatus } from './run-status.js';
import { guardOf, type StepWrite } from './step-write.js';
import type { Lease, UnclaimedRun } from './sql/lease.js';
import { claimedUntil, claimGuardParams, isUnclaimed, UNCLAIMED_GUARD } from './sql/claim-on-write.js';

type CommitPlainWrites = (writes: StepWrite[]) => Set<string>;

const committerOf = weakMemo((connection: BetterSqlite3.Database) => plainWriteCommitter(connection));

/** Answers the runs whose guard passed; every write must be plain (`isPlainWrite`). */
export function commitPlainWritesOnSqlite(db: Db, connection: BetterSqlite3.Database, writes: StepWrite[]): Promise<Set<string>> {
  return db.connection().execute(async () => committerOf(connection)(writes));
}

function plainWriteCommitter(connection: BetterSqlite3.Database): CommitPlainWrites {
  const lease = 'where id = ? and lease_owner = ? and lease_fence = ?';
  // The four shapes of a guarded write (an end always moves: a run never ends `running`).
  const endRun = connection.prepare(
    `update runs set engine_state = ?, automation_status = ?, updated_at = ?, error = ?, lease_owner = null ${lease} and automation_status = ?`,
  );
  const moveRun = connection.prepare(`update runs set engine_state = ?, automation_status = ?, updated_at = ? ${lease} and automation_status = ?`);
  const keepStatus = connection.prepare(`update runs set engine_state = ? ${lease} and automation_status = ?`);
  const keepLease = connection.prepare(`update runs set engine_state = ? ${lease}`);
  // A run's first write claims it (sql/claim-on-write.ts): an end needs no lease after it, a
  // write the run goes on from leases it.
  const unclaimed = `where id = ? and ${UNCLAIMED_GUARD}`;
  const endUnclaimed = connection.prepare(
    `update runs set engine_state = ?, automation_status = ?, updated_at = ?, error = ?, lease_fence = lease_fence + 1 ${unclaimed}`,
  );
  const moveUnclaimed = connection.prepare(
    `update runs set engine_state = ?, automation_status = ?, updated_at = ?, lease_owner = ?, lease_fence = lease_fence + 1, available_at = ? ${unclaimed}`,
  );
  const keepUnclaimed = connection.prepare(`update runs set engine_state = ?, lease_owner = ?, lease_fence = lease_fence + 1, available_at = ? ${unclaimed}`);
  const insertStep = connection.prepare(
    `insert into run_steps (id, run_id, node_id, automation_id, automation_type, attempt, started_at, finished_at, outcome, output, error)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const finishStep = connection.prepare(`update run_steps set finished_at = ?, outcome = ?, output = ?, error = ? where id = ?`);
  const swapTags = tagSwapper(connection);

  function guardedUpdate(write: StepWrite, to: RunStatus, checkStatus: 0 | 1, error: string | null): boolean {
    if (isUnclaimed(write.lease)) return claimingUpdate(write, write.lease, to, error);
    const { runId, owner, fence } = write.lease;
    if (write.end) return endRun.run(write.state, to, write.at, error, runId, owner, fence, write.from).changes === 1;
    if (to !== write.from) return moveRun.run(write.state, to, write.at, runId, owner, fence, write.from).changes === 1;
    if (checkStatus === 1) return keepStatus.run(write.state, runId, owner, fence, write.from).changes === 1;
    return keepLease.run(write.state, runId, owner, fence).changes === 1;
  }

  /** The first write of a run read unclaimed: it holds only if the run is as it was read. */
  function claimingUpdate(write: StepWrite, lease: Lease & { unclaimed: UnclaimedRun }, to: RunStatus, error: string | null): boolean {
    const guard = [lease.runId, ...claimGuardParams(lease)];
    if (write.end) return endUnclaimed.run(write.state, to, write.at, error, ...guard).changes === 1;
    if (to !== write.from) return moveUnclaimed.run(write.state, to, write.at, lease.owner, claimedUntil(lease, write.at), ...guard).changes === 1;
    return keepUnclaimed.run(write.state, lease.owner, claimedUntil(lease, write.at), ...guard).changes === 1;
  }

  function commit(writes: StepWrite[]): Set<string> {
    const applied = new Set<string>();
    const moves = new Map<string, { from: RunStatus; to: RunStatus; at: string; runIds: string[] }>();
    for (const write of writes) {
      const { to, checkStatus, error } = guardOf(write);
      if (!guardedUpdate(write, to, checkStatus, error)) continue;
      const runId = write.lease.runId;
      applied.add(runId);
      const step = write.insertStep;
      if (step) {
        insertStep.run(
          step.id, step.run_id, step.node_id, step.automation_id, step.automation_type, step.attempt, step.started_at,
          step.finished_at, step.outcome, step.output, step.error,
        );
      }
      const finish = write.finishStep;
      if (finish) finishStep.run(finish.finish.at, finish.finish.outcome, finish.finish.output, finish.finish.error, finish.stepId);
      if (to !== write.from) {
        const key = `${write.from}>${to}`;
        const move = moves.get(key) ?? { from: write.from, to, at: write.at, runIds: [] };
        move.runIds.push(runId);
        moves.set(key, move);
      }
    }
    for (const move of moves.values()) swapTags(move.runIds, move.from, move.to, move.at);
    return applied;
  }

  // The workers' leases learn of the claims it commits from its caller (step-committer.ts `commitBatch`).
  return connection.transaction(commit).immediate as CommitPlainWrites;
}

/** Most runs one tag swap statement names; a larger move takes several. */
const SWAP_CHUNK = 64;

/**
 * The Pathway status tag swap of run-transitions.ts `swapStatusTags`, in statements prepared once
 * per run count (at most SWAP_CHUNK of each). Not one run at a time: the change-log triggers on
 * `record_tags` make each tag statement cost a statement journal and a trigger program of its
 * own, and a swap per run took twice the time of one per batch (35 against 16 µs a run,
 * 60-run batches).
 */
function tagSwapper(connection: BetterSqlite3.Database): (runIds: string[], from: RunStatus, to: RunStatus, at: string) => void {
  const bySize = new Map<number, { drop: BetterSqlite3.Statement; add: BetterSqlite3.Statement; touch: BetterSqlite3.Statement }>();
  const statementsFor = (n: number) => {
    let statements = bySize.get(n);
    if (!statements) {
      const ids = `(${Array.from({ length: n }, () => '?').join(', ')})`;
      statements = {
        drop: connection.prepare(`delete from record_tags where record_id in ${ids} and tag = ?`),
        add: connection.prepare(
          `insert into record_tags (record_id, workspace_id, tag) select id, workspace_id, ? from records where id in ${ids}
           on conflict (record_id, tag) do nothing`,
        ),
        touch: connection.prepare(`update records set updated_at = ? where id in ${ids}`),
      };
      bySize.set(n, statements);
    }
    return statements;
  };
  return (runIds, from, to, at) => {
    for (let start = 0; start < runIds.length; start += SWAP_CHUNK) {
      const chunk = runIds.slice(start, start + SWAP_CHUNK);
      const { drop, add, touch } = statementsFor(chunk.length);
      drop.run(...chunk, from);
      add.run(to, ...chunk);
      touch.run(at, ...chunk);
    }
  };
}
