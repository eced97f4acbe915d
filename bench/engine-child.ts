/**
 * A worker process for the engine benchmark: `BENCH_MODE=engine` runs the engine's worker (as
 * `carepath worker` does), `BENCH_MODE=raw` the raw claim-and-complete loop. It prints "ready"
 * once connected, starts on a "go" line on stdin, and (raw) prints "done <n>" when the queue is
 * empty, or (engine) runs until SIGTERM.
 */
import { createInterface } from 'node:readline';
import { sql } from 'kysely';
import { loadConfig } from '../src/config.js';
import { createContainer } from '../src/container.js';
import { createLogger } from '../src/lib/logger.js';
import { openStore } from '../src/storage/connect.js';
import { startEngineWorker } from '../src/engine/worker-service.js';
import { rawWorkerLoop } from './raw-queue.js';

const schema = process.env.BENCH_PG_SCHEMA || undefined;
const go = new Promise<void>((resolve) => createInterface({ input: process.stdin }).on('line', (line) => line.trim() === 'go' && resolve()));

if (process.env.BENCH_MODE === 'raw') {
  const store = openStore(process.env.CAREPATH_DATABASE_URL!, { schema, poolSize: 10 });
  await sql`select 1 from raw_jobs limit 1`.execute(store.db);
  process.stdout.write('ready\n');
  await go;
  const done = await rawWorkerLoop(store.db, store.dialect, `raw-${process.pid}`, Number(process.env.BENCH_BATCH ?? 20));
  process.stdout.write(`done ${done}\n`);
  await store.close();
  process.exit(0);
} else {
  const container = await createContainer(loadConfig(process.env), {
    logger: createLogger('error'),
    storeOptions: { schema, poolSize: 10 },
    migrate: false,
  });
  process.stdout.write('ready\n');
  await go;
  const service = await startEngineWorker(container);
  process.once('SIGTERM', async () => {
    await service.stop();
    await container.close();
    process.exit(0);
  });
}
