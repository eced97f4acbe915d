/**
 * A batch of plain step writes (step-write.ts: rows only, no effect) committed on PostgreSQL in
 * ONE statement: the writes travel as arrays (`unnest`), and data-modifying CTEs guard and
 * write the runs, insert and finish their step rows, and swap the Pathway status tags of the
 * runs that moved, all only for the runs whose guard passed. One round trip and one implicit
 * transaction instead of seven (BEGIN, guarded UPDATE, step rows, the tag swap's three
 * statements, COMMIT).
 *
 * Why: the group commit is what a worker's runs wait for, and its slots stay taken meanwhile.
 * Measured on the 2-core bench machine (fires at 1,470/s into one worker process): the
 * transaction took 22 ms at p50 for about 20 runs, 8 ms of it in the tag swap, the rest mostly
 * waiting for the server's turn on a busy CPU between statements; the 64 slots filled, claims
 * waited for room and fire-to-running grew to 150–200 ms (src/engine/README.md, "Decisions").
 *
 * Same guarantees as the transaction (step-committer.ts `commitWrites`): each run's rows are
 * written only when its own guard holds (lease at its fence, and the status its worker knows),
 * and everything commits together or not at all. The statement's sub-statements share one
 * snapshot; none touches a row another one touches (the tag swap deletes the old status tag and
 * inserts the new one, never the same). The change-log triggers on record_tags are statement
 * triggers and run once for the deleted and once for the inserted tags.
 *
 * The batch's runs are locked in id order (`locked`) before any is written: the order an
 * event's wake locks the runs waiting for it (event-waits.ts). Locked in whatever order the
 * plan took the writes, a batch holding one of two waiting runs of a patient and a wake holding
 * the other waited for each other until PostgreSQL rolled one back; a wake rolled back stayed
 * on its delivery until a sweep, and the runs saw the event only then
 * (test/integration/engine-run-lock-order.test.ts).
 *
 * The text does not depend on the batch size, so it runs as a named (server-side prepared)
 * statement: each pooled connection parses and plans it once.
 */
import type pg from 'pg';
import { GUARDED_RUN_CHANGES, guardOf, type StepWrite } from './step-write.js';

const COMMIT_STEPS_SQL = `
  with w as (
    select * from unnest($1::text[], $2::integer[], $3::text[], $4::text[], $5::text[], $6::integer[], $7::integer[], $8::text[], $9::text[])
      as t(id, fence, state, from_status, to_status, check_status, ends, error, at)
  ),
  locked as (
    select runs.id from runs where runs.id = any($1::text[]) and runs.lease_owner = $10 order by runs.id for update
  ),
  guarded as (
    update runs set ${GUARDED_RUN_CHANGES}
    from w
    where runs.id = w.id
      and runs.id in (select id from locked)
      and runs.lease_owner = $10
      and runs.lease_fence = w.fence
      and (w.check_status = 0 or runs.automation_status = w.from_status)
    returning runs.id, w.from_status, w.to_status, w.at
  ),
  new_steps as (
    insert into run_steps (id, run_id, node_id, automation_id, automation_type, attempt, started_at, finished_at, outcome, output, error)
    select s.* from unnest($11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::integer[], $17::text[],
                           $18::text[], $19::text[], $20::text[], $21::text[])
      as s(id, run_id, node_id, automation_id, automation_type, attempt, started_at, finished_at, outcome, output, error)
    where s.run_id in (select id from guarded)
  ),
  finished_steps as (
    update run_steps set finished_at = f.finished_at, outcome = f.outcome, output = f.output, error = f.error
    from unnest($22::text[], $23::text[], $24::text[], $25::text[], $26::text[], $27::text[])
      as f(id, run_id, finished_at, outcome, output, error)
    where run_steps.id = f.id and f.run_id in (select id from guarded)
  ),
  moved as (
    select * from guarded where to_status <> from_status
  ),
  old_tags as (
    delete from record_tags using moved where record_tags.record_id = moved.id and record_tags.tag = moved.from_status
  ),
  new_tags as (
    insert into record_tags (record_id, workspace_id, tag)
    select records.id, records.workspace_id, moved.to_status from moved join records on records.id = moved.id
    on conflict (record_id, tag) do nothing
  ),
  touched as (
    update records set updated_at = moved.at from moved where records.id = moved.id
  )
  select id from guarded`;

/** Answers the runs whose guard passed; every write must be plain (`isPlainWrite`). */
export async function commitPlainWritesOnPostgres(pool: pg.Pool, writes: StepWrite[]): Promise<Set<string>> {
  const runs = writes.map((write) => ({ write, guard: guardOf(write) }));
  const steps = writes.flatMap((write) => (write.insertStep ? [write.insertStep] : []));
  const finishes = writes.flatMap((write) => (write.finishStep ? [{ runId: write.lease.runId, ...write.finishStep }] : []));
  const result = await pool.query<{ id: string }>({
    name: 'carepath_commit_steps_v2',
    text: COMMIT_STEPS_SQL,
    values: [
      runs.map(({ write }) => write.lease.runId),
      runs.map(({ write }) => write.lease.fence),
      runs.map(({ write }) => write.state),
      runs.map(({ write }) => write.from),
      runs.map(({ guard }) => guard.to),
      runs.map(({ guard }) => guard.checkStatus),
      runs.map(({ guard }) => guard.ends),
      runs.map(({ guard }) => guard.error),
      runs.map(({ write }) => write.at),
      writes[0].lease.owner,
      steps.map((step) => step.id),
      steps.map((step) => step.run_id),
      steps.map((step) => step.node_id),
      steps.map((step) => step.automation_id),
      steps.map((step) => step.automation_type),
      steps.map((step) => step.attempt),
      steps.map((step) => step.started_at),
      steps.map((step) => step.finished_at),
      steps.map((step) => step.outcome),
      steps.map((step) => step.output),
      steps.map((step) => step.error),
      finishes.map((finish) => finish.stepId),
      finishes.map((finish) => finish.runId),
      finishes.map((finish) => finish.finish.at),
      finishes.map((finish) => finish.finish.outcome),
      finishes.map((finish) => finish.finish.output),
      finishes.map((finish) => finish.finish.error),
    ],
  });
  return new Set(result.rows.map((row) => row.id));
}
