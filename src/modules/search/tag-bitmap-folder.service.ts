/**
 * Folds the tag change log into the tag bitmaps in the background of `carepath serve` and
 * `carepath worker` (src/background.ts). Search is exact without it, since readers apply the
 * changes not yet folded, but every unfolded change costs every search a little; folding keeps
 * the log short. On PostgreSQL the processes take turns (an advisory lock), so running several
 * folds nothing twice.
 */
import type { BackgroundService } from '../../background.js';
import { foldTagChanges } from './tag-bitmap.repository.js';
import { sql } from 'kysely';
import { LoopFailureLog } from '../../lib/loop-failure-log.js';
import { dialectOfDb } from '../../storage/dialect.js';

export interface TagBitmapFolderOptions {
  /** pause between rounds once the log is empty */
  pollMs?: number;
  /** changes folded per transaction */
  batch?: number;
  /** PostgreSQL: changes folded before the emptied log is vacuumed (VACUUM_AFTER_FOLDED) */
  vacuumAfter?: number;
}

/**
 * PostgreSQL: after this many changes folded, once the log is empty, it is vacuumed and analyzed.
 * Folding deletes every row of the log it reads, and after a large import (millions of changes)
 * its dead rows and stale statistics made every search's read of the log a sequential scan of
 * them (140–150 ms a search until autovacuum came round; a scale review).
 */
const VACUUM_AFTER_FOLDED = 200_000;

export function tagBitmapFolderService(options: TagBitmapFolderOptions = {}): BackgroundService {
  const pollMs = options.pollMs ?? 250;
  const batch = options.batch ?? 20_000;
  const vacuumAfter = options.vacuumAfter ?? VACUUM_AFTER_FOLDED;
  return {
    name: 'tag-bitmap-folder',
    async start(container) {
      let stopping = false;
      let wake: (() => void) | null = null;
      let foldedSinceVacuum = 0;
      const failures = new LoopFailureLog(container.logger, 'could not fold tag changes');
      const loop = async () => {
        while (!stopping) {
          let folded = 0;
          try {
            folded = await foldTagChanges(container.db, batch);
            foldedSinceVacuum += folded;
            if (folded < batch && foldedSinceVacuum >= vacuumAfter && dialectOfDb(container.db) === 'postgres') {
              foldedSinceVacuum = 0;
              await sql`vacuum (analyze) record_tag_changes`.execute(container.db);
            }
            failures.succeeded();
          } catch (error) {
            failures.failed(error);
          }
          // A full batch means more is waiting: go on at once.
          if (stopping || folded >= batch) continue;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, pollMs);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          wake = null;
        }
      };
      const running = loop();
      return {
        async stop() {
          stopping = true;
          (wake as (() => void) | null)?.();
          await running;
        },
      };
    },
  };
}
