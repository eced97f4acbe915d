/**
 * The engine as a background service of `carepath serve` and `carepath worker`: one worker per
 * process, woken by local signals and, on PostgreSQL, by other processes' notifications.
 */
import type { BackgroundService, RunningService } from '../background.js';
import type { Container } from '../container.js';
import { engineServices } from './engine-services.js';
import { parseProxyUrl } from './outbound/proxy.js';
import { startStoreSignals } from './store-signals.js';
import { RunWorker, type WorkerOptions } from './worker.js';

export async function startEngineWorker(container: Container, options: WorkerOptions = {}): Promise<RunningService & { worker: RunWorker }> {
  const worker = new RunWorker(engineServices(container), options);
  const signals = await startStoreSignals(container, () => worker.wake());
  worker.start();
  return {
    worker,
    async stop() {
      await worker.stop();
      await signals.close();
    },
  };
}

export const engineWorkerService: BackgroundService = {
  name: 'run-engine',
  start: (container) => {
    const { httpProxy, httpNoProxy } = container.config;
    // Said once at start, so an operator sees the setting took; the proxy's host only, never its credentials.
    if (httpProxy !== undefined) {
      container.logger.info({ component: 'run-engine', proxy: parseProxyUrl(httpProxy).host, noProxy: httpNoProxy }, 'http automations go through a forward proxy');
    }
    return startEngineWorker(container);
  },
};
