/**
 * The engine as a background service of `carepath serve` and `carepath worker`: one worker per
 * process, woken by local signals and, on PostgreSQL, by other processes' notifications.
 */
import type { BackgroundService, RunningService } from '../background.js';
import type { Container } from '../container.js';
import { engineServices } from './engine-services.js';
import { startStoreSignals } from './store-signals.js';
import { RunWorker, type WorkerOptions } from './worker.js';

export async function startEngineWorker(container: Container, options: WorkerOptions = {}): Promise<RunningService & { worker: RunWorker }> {
  const services = engineServices(container);
  const { proxy } = services.outbound;
  // Said once at start, so an operator sees the setting took; the proxy's host only, never its credentials.
  if (proxy) {
    container.logger.info({ component: 'run-engine', proxy: proxy.host, noProxy: container.config.httpNoProxy }, 'http automations go through a forward proxy');
  }
  const worker = new RunWorker(services, options);
  const signals = await startStoreSignals(container, () => worker.wake());
  worker.start();
  return {
    worker,
    owner: worker.id,
    async stop() {
      await worker.stop();
      await signals.close();
    },
  };
}

export const engineWorkerService: BackgroundService = {
  name: 'run-engine',
  start: (container) => startEngineWorker(container),
};
