/**
 * `carepath serve | api | worker`: the long-running commands. Each is the same life cycle with
 * different parts switched on (DESIGN §1): serve = HTTP + background services + the demo seed,
 * api = HTTP alone, worker = background services alone.
 */
import { publicUrlWarnings, type Config } from '../config.js';
import { createContainer } from '../container.js';
import { createLogger } from '../lib/logger.js';
import { CAREPATH_VERSION, SCHEMA_LEVEL } from './version.js';
import { startBackgroundServices, type RunningService } from '../background.js';
import { shutdownSignal, startServer, type RunningServer } from '../server.js';
import { demoNotice, seedDemoIfEmpty } from './demo-seed.js';
import { countTenants } from '../modules/tenancy/tenancy.repository.js';
import { startStoreSignals, type StoreSignals } from '../engine/store-signals.js';
import { holdSqliteProcessLock } from '../storage/sqlite-process-lock.js';
import { giveBackLeasesOfDeadProcesses } from '../storage/dead-process-leases.js';
import { watchClockSkew } from '../storage/clock-skew.js';
import { checkSecretKeyOpensStore } from '../modules/secrets/secret-key-check.js';
import { countPlainSecrets } from '../modules/secrets/seal-plain-secrets.js';
import { waitForStore } from './wait-for-store.js';

export interface ServiceParts {
  http: boolean;
  background: boolean;
  /** Seed a demo on an empty store (serve only: scaled-out processes never invent tenants). */
  seedDemo: boolean;
}

export const SERVICE_PARTS = {
  serve: { http: true, background: true, seedDemo: true },
  api: { http: true, background: false, seedDemo: false },
  worker: { http: false, background: true, seedDemo: false },
} as const satisfies Record<string, ServiceParts>;

/** Runs each step even when an earlier one failed, then reports the first failure. */
async function stopInOrder(steps: (() => Promise<void>)[]): Promise<void> {
  let failure: unknown = null;
  for (const step of steps) {
    try {
      await step();
    } catch (error) {
      failure ??= error;
    }
  }
  if (failure) throw failure;
}

/** Runs until SIGINT/SIGTERM, then stops gracefully; `print` writes the demo notice to stdout. */
export async function runService(config: Config, parts: ServiceParts, print: (text: string) => void): Promise<void> {
  // Listen for signals before starting, so one that arrives during start-up still stops cleanly.
  const stopping = shutdownSignal();
  // On SQLite, one such process per database file: a second one stops here with a sentence.
  const lock = holdSqliteProcessLock(config.databaseUrl);
  // Which version this process is, said before it migrates (a start that fails there says which
  // one failed): during a rolling deploy old and new processes share one log.
  const logger = createLogger(config.logLevel);
  logger.info({ version: CAREPATH_VERSION, schema: SCHEMA_LEVEL, http: parts.http, background: parts.background }, 'carepath starting');
  const container = await waitForStore(() => createContainer(config, { logger }), logger).catch((error: unknown) => {
    lock?.release();
    throw error;
  });
  // A process whose CAREPATH_SECRET_KEY cannot open the store's secrets stops here, with a
  // sentence, instead of answering every signed delivery with 500.
  try {
    await checkSecretKeyOpensStore(container.db, config.secretKey);
  } catch (error) {
    await container.close();
    lock?.release();
    throw error;
  }
  // Secrets stored while the store had no key stay readable until the operator seals them, once
  // every process has the key (sealing here broke the processes of a rolling deploy still
  // running without it): said at every start until then.
  // Without a key (allowed in staging only) every secret is stored readable: said at each start,
  // as the integration guide's readers took "sealed" to hold whatever the settings.
  if (config.secretKey === undefined) {
    logger.warn(
      'CAREPATH_SECRET_KEY is not set: webhook signing secrets and partner secrets are stored readable in the database (allowed in staging only; make a key with: openssl rand -hex 32)',
    );
  } else {
    const readable = await countPlainSecrets(container.db).catch(() => null);
    if (readable && readable.webhookSecrets + readable.partnerSecrets > 0) {
      logger.warn(
        readable,
        'secrets stored before CAREPATH_SECRET_KEY was set are still readable in the database: once every process runs with the key, run carepath admin secret seal-stored',
      );
    }
  }
  // Only a process that serves the API hands webhook urls out.
  if (parts.http) for (const warning of publicUrlWarnings(config)) logger.warn(warning);
  // On PostgreSQL, a machine whose clock is off is named in the log (at start and every minute).
  const stopClockWatch = watchClockSkew(container.db, container.logger);
  let server: RunningServer | null = null;
  let background: RunningService | null = null;
  let forwarding: StoreSignals | null = null;
  try {
    if (parts.http) server = await startServer(container);
    // An API-only process tells workers elsewhere about the runs it creates (PostgreSQL NOTIFY),
    // so they need not wait for their next poll; with background services the worker does it.
    if (parts.http && !parts.background) forwarding = await startStoreSignals(container);
    // Seeded after listening succeeds: a port already in use must not swallow the only copy of the key.
    // No demo in production: a full-access key nobody asked for, printed where a log collector reads.
    if (parts.seedDemo && config.environment === 'production') {
      if ((await countTenants(container.db)) === 0) {
        container.logger.info('the store has no workspace yet (no demo is made in production): carepath admin workspace create --tenant <name> --name <name>, then carepath admin key create');
      }
    } else if (parts.seedDemo) {
      const seed = await seedDemoIfEmpty(container);
      if (seed) print(demoNotice(seed, config.publicUrl));
    }
    if (parts.background && lock) {
      // SQLite: this process holds the file's lock, so any lease in it is a dead process's.
      const givenBack = await giveBackLeasesOfDeadProcesses(container.db, container.clock.now().toISOString());
      if (givenBack.runs + givenBack.deliveries + givenBack.plannedRuns > 0) {
        container.logger.info(givenBack, 'took back the work a stopped process still held');
      }
    }
    if (parts.background) background = await startBackgroundServices(container);
    if (!parts.http) container.logger.info('carepath worker running');
    // Signal listeners do not keep Node running: a worker whose services are all idle (or that
    // has none) would otherwise end here. This timer holds the process until the signal.
    const holdOpen = setInterval(() => undefined, 60 * 60 * 1000);
    const signal = await stopping.finally(() => clearInterval(holdOpen));
    container.logger.info({ signal }, 'carepath stopping');
  } finally {
    stopClockWatch();
    await stopInOrder([
      async () => server?.close(),
      async () => background?.stop(),
      async () => forwarding?.close(),
      () => container.close(),
      async () => lock?.release(),
    ]);
  }
}
