/**
 * The composition root: one place builds the database, clock, logger and services, and hands
 * the same container to the HTTP app, the engine and the CLI. Nothing else creates them.
 */
import type { Config } from './config.js';
import { systemClock, type Clock } from './lib/clock.js';
import { createLogger, type Logger } from './lib/logger.js';
import type { Dialect, Store, StoreOptions } from './storage/connect.js';
import type { Db } from './storage/database.js';
import { openMigratedStore, slowMigrationMessage } from './storage/migrate.js';
import { MemoryRateLimiter, PostgresRateLimiter, type RateLimiter } from './http/rate-limit/rate-limiter.js';
import { KeyUsageRecorder } from './auth/key-usage.js';
import { WorkSignals } from './lib/work-signals.js';
import { RunCreator } from './engine/run-creator.js';
import { KeyResolver } from './auth/key.repository.js';
import { TriggerForFireResolver } from './modules/triggers/trigger.repository.js';
import { ThreadDeliveryReader, type DeliveryReader } from './modules/deliveries/delivery-reader.js';
import { loggableError } from './lib/store-errors.js';

export interface Container {
  config: Config;
  store: Store;
  db: Db;
  clock: Clock;
  logger: Logger;
  rateLimiter: RateLimiter;
  keyUsage: KeyUsageRecorder;
  /** In-process wake-ups: the API tells a local worker that work is waiting. */
  signals: WorkSignals;
  /** Every new run goes through it (group commit, idempotency claims). */
  runCreator: RunCreator;
  /** API keys by presented secret (coalesced reads, never cached). */
  keys: KeyResolver;
  /** Triggers and their blueprints for fires (coalesced reads, never cached). */
  triggersForFire: TriggerForFireResolver;
  /** Delivery bodies parsed, checked and digested on a thread of their own (started on first use). */
  deliveryReader: DeliveryReader;
  close(): Promise<void>;
}

/**
 * The parts every background worker takes from the container (the run engine and the delivery
 * processor add their own on top), picked in one place.
 */
export interface WorkerBasics {
  db: Db;
  dialect: Dialect;
  clock: Clock;
  logger: Logger;
  signals: WorkSignals;
  runCreator: RunCreator;
}

export function workerBasics(container: Container): WorkerBasics {
  return {
    db: container.db,
    dialect: container.store.dialect,
    clock: container.clock,
    logger: container.logger,
    signals: container.signals,
    runCreator: container.runCreator,
  };
}

export interface ContainerOptions {
  clock?: Clock;
  logger?: Logger;
  storeOptions?: StoreOptions;
  /** Run migrations on open (serve, api, worker and tests do; admin commands too). */
  migrate?: boolean;
}

export async function createContainer(config: Config, options: ContainerOptions = {}): Promise<Container> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const clock = options.clock ?? systemClock;
  const { store, applied } = await openMigratedStore(config.databaseUrl, {
    storeOptions: options.storeOptions,
    migrate: options.migrate,
    onSlow: (waited) => logger.warn({ waitedSeconds: waited }, slowMigrationMessage(waited)),
  });
  // An upgrade's schema change is worth a line: a process that migrated at start said nothing.
  if (applied.length > 0) logger.info({ migrations: applied.map((result) => result.migrationName) }, 'brought the store up to date');
  const rateLimiter: RateLimiter =
    store.dialect === 'postgres'
      ? new PostgresRateLimiter(store.db, config.rateLimit, () => clock.now().getTime())
      : new MemoryRateLimiter(config.rateLimit, () => clock.now().getTime());
  const keyUsage = new KeyUsageRecorder(store.db, clock, (error) =>
    logger.warn({ err: loggableError(error) }, 'could not record key usage'),
  );
  const signals = new WorkSignals();
  const runCreator = new RunCreator(store.db, signals, {
    dialect: store.dialect,
    concurrency: store.dialect === 'postgres' ? 4 : 1,
  });
  const deliveryReader = new ThreadDeliveryReader((error) =>
    logger.error({ component: 'delivery-reader', err: loggableError(error) }, 'delivery reader thread lost; its bodies are read on the serving thread'),
  );
  return {
    config,
    store,
    db: store.db,
    clock,
    logger,
    rateLimiter,
    keyUsage,
    signals,
    runCreator,
    keys: new KeyResolver(store.db),
    triggersForFire: new TriggerForFireResolver(store.db),
    deliveryReader,
    async close() {
      await keyUsage.flush();
      await runCreator.close();
      await deliveryReader.close();
      await store.close();
    },
  };
}
