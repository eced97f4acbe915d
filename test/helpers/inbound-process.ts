/**
 * A service process for the crash suite (test/integration/ingestion-crash.test.ts): the HTTP app,
 * the delivery processor and the scheduler on the store named by CAREPATH_DATABASE_URL (and
 * INBOUND_PG_SCHEMA on PostgreSQL), listening on a free port that it prints as `{"port": n}`.
 *
 * Why not `carepath serve`: it holds delivery leases for 60 s, so every restart after a kill
 * would wait a minute before taking the delivery over. Here INBOUND_LEASE_MS (default 1000)
 * sets the leases, and the FHIR validator compiles lazily (the suite restarts this process
 * often; compiled at start it added 3 s to each); everything else is the production code path.
 */
import { loadConfig } from '../../src/config.js';
import { createContainer } from '../../src/container.js';
import { buildApp } from '../../src/http/app.js';
import { createLogger } from '../../src/lib/logger.js';
import { deliveryProcessorService } from '../../src/modules/deliveries/delivery-processor.service.js';
import { schedulerService } from '../../src/modules/scheduling/scheduler.service.js';

const schema = process.env.INBOUND_PG_SCHEMA;
const leaseMs = Number(process.env.INBOUND_LEASE_MS ?? 1000);
const container = await createContainer(loadConfig({ ...process.env, CAREPATH_RATE_LIMIT: '100000/1s' }), {
  logger: createLogger('silent'),
  storeOptions: schema ? { schema, poolSize: 6 } : {},
});
const app = await buildApp(container);
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
const port = typeof address === 'object' && address ? address.port : 0;
for (const service of [deliveryProcessorService({ leaseMs, planLeaseMs: leaseMs, pollMs: 50, warmValidator: false }), schedulerService({ planLeaseMs: leaseMs, pollMs: 200 })]) {
  await service.start(container);
}
process.stdout.write(`${JSON.stringify({ port })}\n`);
