/**
 * Folds the tag change log into the tag bitmaps in the background of `carepath serve` and
 * `carepath worker` (src/background.ts). Search is exact without it, since readers apply the
 * changes not yet folded, but every unfolded change costs every search a little; folding keeps
 * the log short. On PostgreSQL the processes take turns (an advisory lock), so running several
 * folds nothing twice.
 */
import type { BackgroundService } from '../../background.js';
import { foldTagChanges } from './tag-bitmap.repository.js';
import { loggableError } from '../../lib/store-errors.js';

export interface TagBitmapFolderOptions {
  /** pause between rounds once the log is empty */
  pollMs?: number;
  /** changes folded per transaction */
  batch?: number;
}

export function tagBitmapFolderService(options: TagBitmapFolderOptions = {}): BackgroundService {
  const pollMs = options.pollMs ?? 250;
  const batch = options.batch ?? 20_000;
  return {
    name: 'tag-bitmap-folder',
    async start(container) {
      let stopping = false;
      let wake: (() => void) | null = null;
      const loop = async () => {
        while (!stopping) {
          let folded = 0;
          try {
            folded = await foldTagChanges(container.db, batch);
          } catch (error) {
            container.logger.error({ err: loggableError(error) }, 'could not fold tag changes');
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
