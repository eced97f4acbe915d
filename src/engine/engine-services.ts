/**
 * What the engine needs from the rest of the service, gathered once from the container so the
 * worker, the executor's shell and the automations take plain arguments (and tests can build
 * them with other settings, e.g. fast retries).
 */
import { workerBasics, type Container } from '../container.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { WorkSignals } from '../lib/work-signals.js';
import type { TriggerForFireResolver } from '../modules/triggers/trigger.repository.js';
import type { Dialect } from '../storage/connect.js';
import type { Db } from '../storage/database.js';
import { createAllowList, type AllowList } from './outbound/allow-list.js';
import { DEFAULT_BACKOFF, type BackoffPolicy } from './outbound/backoff.js';
import type { RunCreator } from './run-creator.js';

export interface OutboundSettings {
  allow: AllowList;
  backoff: BackoffPolicy;
  /** Per try, unless the automation sets `timeoutMs`. */
  timeoutMs: number;
}

export interface EngineServices {
  db: Db;
  dialect: Dialect;
  clock: Clock;
  logger: Logger;
  signals: WorkSignals;
  runCreator: RunCreator;
  triggers: TriggerForFireResolver;
  outbound: OutboundSettings;
}

export function engineServices(container: Container, outbound: Partial<OutboundSettings> = {}): EngineServices {
  return {
    ...workerBasics(container),
    triggers: container.triggersForFire,
    outbound: {
      allow: outbound.allow ?? createAllowList(container.config.httpAllow),
      backoff: outbound.backoff ?? DEFAULT_BACKOFF,
      timeoutMs: outbound.timeoutMs ?? 10_000,
    },
  };
}
