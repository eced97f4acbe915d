/**
 * A worker process for the crash tests: the same engine worker `carepath worker` starts (the
 * run-engine background service), with the short lease and quick polling those tests need,
 * which the operator contract does not expose. Prints "ready" once claiming, stops on SIGTERM;
 * the tests SIGKILL it to crash it for real.
 *
 * env: CAREPATH_DATABASE_URL, CAREPATH_HTTP_ALLOW, ENGINE_PG_SCHEMA (PostgreSQL test schema),
 *      ENGINE_LEASE_MS, ENGINE_WORKER_ID
 */
import { loadConfig } from '../../src/config.js';
import { createContainer } from '../../src/container.js';
import { createLogger } from '../../src/lib/logger.js';
import { startEngineWorker } from '../../src/engine/worker-service.js';

const config = loadConfig(process.env);
const schema = process.env.ENGINE_PG_SCHEMA;
const container = await createContainer(config, {
  logger: createLogger('error'),
  storeOptions: schema ? { schema, poolSize: 10 } : {},
  migrate: false,
});
const service = await startEngineWorker(container, {
  workerId: process.env.ENGINE_WORKER_ID,
  leaseMs: Number(process.env.ENGINE_LEASE_MS ?? 1000),
  pollMs: 50,
});
process.stdout.write('ready\n');
process.once('SIGTERM', async () => {
  await service.stop();
  await container.close();
  process.exit(0);
});
