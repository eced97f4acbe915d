/**
 * The whole service as `carepath serve` runs it (the HTTP API and every background service: run
 * engine, delivery processor, scheduler, tag folder) on the store in CAREPATH_DATABASE_URL (and
 * BENCH_PG_SCHEMA for a PostgreSQL schema). Prints `{"port": n}`.
 */
import { loadConfig } from '../../src/config.js';
import { createContainer } from '../../src/container.js';
import { buildApp } from '../../src/http/app.js';
import { createLogger } from '../../src/lib/logger.js';
import { startBackgroundServices } from '../../src/background.js';

const config = loadConfig({ ...process.env, CAREPATH_RATE_LIMIT: '1000000/1s' });
const schema = process.env.BENCH_PG_SCHEMA;
const container = await createContainer(config, {
  logger: createLogger('error'),
  storeOptions: schema ? { schema } : {},
});
const app = await buildApp(container);
const background = await startBackgroundServices(container);
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
process.on('SIGTERM', async () => {
  await app.close();
  await background.stop();
  await container.close();
  process.exit(0);
});
