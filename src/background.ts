/**
 * The parts of a process that work without a request: the run engine's workers, the delivery
 * processor, the scheduler, the tag bitmap folder. `carepath serve` and `carepath worker` start every one of them;
 * `carepath api` starts none. A part adds itself to `backgroundServices`.
 */
import type { Container } from './container.js';
import { deliveryProcessorService } from './modules/deliveries/delivery-processor.service.js';
import { schedulerService } from './modules/scheduling/scheduler.service.js';
import { engineWorkerService } from './engine/worker-service.js';
import { tagBitmapFolderService } from './modules/search/tag-bitmap-folder.service.js';

export interface RunningService {
  /** Stops taking new work and waits for work in hand to reach a safe point. */
  stop(): Promise<void>;
  /** The name its leases and log lines carry (`lease_owner`, `workerId`), said when it starts. */
  owner?: string;
}

export interface BackgroundService {
  name: string;
  start(container: Container): Promise<RunningService>;
}

export const backgroundServices: BackgroundService[] = [
  deliveryProcessorService(),
  schedulerService(),
  engineWorkerService,
  tagBitmapFolderService(),
];

export async function startBackgroundServices(container: Container): Promise<RunningService> {
  const running: { name: string; service: RunningService }[] = [];
  for (const service of backgroundServices) {
    const started = await service.start(container);
    running.push({ name: service.name, service: started });
    container.logger.info({ component: service.name, ...(started.owner ? { owner: started.owner } : {}) }, 'background service started');
  }
  return {
    async stop() {
      // Stop in reverse order of start, each one fully, so nothing is left half-done.
      for (const { service } of running.reverse()) await service.stop();
    },
  };
}
