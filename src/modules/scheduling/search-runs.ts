/**
 * The runs of one search-trigger evaluation (a schedule tick or `POST …/evaluate`, DESIGN §9):
 * one per record the saved query matches, subject = that record, all with one idempotency key.
 * onePerSubject (default true for search triggers) holds back records that already have a run of
 * the trigger that is not terminal, or one planned. A query over Pathway records never matches
 * runs that were started for a run (the trigger's own, or another such trigger's): each tick
 * would otherwise start a run for every run the last one started, without end. Planned inside
 * the caller's transaction.
 */
import type { DbOrTx } from '../../storage/database.js';
import type { Dialect } from '../../storage/connect.js';
import { insertPlannedRuns, lockTriggers, subjectKey, subjectsWithLiveRuns } from '../events/planned-runs.repository.js';
import { plannedRun, type PlanContext } from '../events/run-plan.js';
import { runsAboutRunsAmong, type SearchTrigger } from './search-trigger.repository.js';
import { findMatches, recordIdsAt } from '../search/search.repository.js';

/** Records read and planned per round: bounded memory for any cohort size. */
const PAGE = 5000;

export interface SearchRunsResult {
  plannedRunIds: string[];
  matched: number;
  /** matched records held back by onePerSubject, or that are runs started for a run */
  skipped: number;
}

export async function planSearchRuns(
  db: DbOrTx,
  dialect: Dialect,
  trigger: SearchTrigger & { query: NonNullable<SearchTrigger['query']> },
  context: PlanContext,
  run: { idempotencyKey: string; tick: string; origin: Record<string, unknown> },
): Promise<SearchRunsResult> {
  const onePerSubject = trigger.one_per_subject === 1;
  if (onePerSubject) await lockTriggers(db, dialect, [trigger.id]);
  const payloadJson = JSON.stringify({ queryId: trigger.query_id, tick: run.tick });
  const result: SearchRunsResult = { plannedRunIds: [], matched: 0, skipped: 0 };

  // The very matches search answers (tag bitmaps), read in the tick's transaction, then their ids
  // a page at a time in position order.
  const matches = await findMatches(db, trigger.workspace_id, trigger.query);
  const positions = [...matches.positions.positions()];
  for (let from = 0; from < positions.length; from += PAGE) {
    const page = await recordIdsAt(db, trigger.workspace_id, positions.slice(from, from + PAGE));
    result.matched += page.length;
    const live = onePerSubject ? await subjectsWithLiveRuns(db, [trigger.id], page) : new Set<string>();
    const aboutRuns = trigger.query.resourceType === 'Pathway' ? await runsAboutRunsAmong(db, page) : new Set<string>();
    const rows = page
      .filter((recordId) => !live.has(subjectKey(trigger.id, recordId)) && !aboutRuns.has(recordId))
      .map((recordId) =>
        plannedRun(trigger, context, {
          subjectRecordId: recordId,
          payloadJson,
          idempotencyKey: run.idempotencyKey,
          origin: run.origin,
        }),
      );
    result.skipped += page.length - rows.length;
    await insertPlannedRuns(db, rows);
    for (const row of rows) result.plannedRunIds.push(row.id);
  }
  return result;
}
