/**
 * The scheduler as a background service of `carepath serve` and `carepath worker`
 * (src/background.ts). Every such process runs one; ticks are claimed in the store, so running
 * several never runs a tick twice.
 */
import type { BackgroundService } from '../../background.js';
import { workerBasics } from '../../container.js';
import { Scheduler, type SchedulerOptions } from './scheduler.js';

export function schedulerService(options: SchedulerOptions = {}): BackgroundService {
  return {
    name: 'scheduler',
    async start(container) {
      const scheduler = new Scheduler({ ...workerBasics(container), now: () => container.clock.now() }, options);
      scheduler.start();
      return { stop: () => scheduler.stop() };
    },
  };
}
