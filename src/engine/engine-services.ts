/**
 * What the engine needs from the rest of the service, gathered once from the container so the
 * worker, the executor's shell and the automations take plain arguments (and tests can build
 * them with other settings, e.g. fast retries).
 */
import { workerBasics, type Container, type WorkerBasics } from '../container.js';
import type { TriggerForFireResolver } from '../modules/triggers/trigger.repository.js';
import { createAllowList, type AllowList } from './outbound/allow-list.js';
import { DEFAULT_BACKOFF, type BackoffPolicy } from './outbound/backoff.js';
import { createOutboundProxy, type OutboundProxy } from './outbound/proxy.js';

export interface OutboundSettings {
  allow: AllowList;
  /** The forward proxy (CAREPATH_HTTP_PROXY), or null to connect directly. */
  proxy: OutboundProxy | null;
  backoff: BackoffPolicy;
  /** Per try, unless the automation sets `timeoutMs`. */
  timeoutMs: number;
}

export interface EngineServices extends WorkerBasics {
  triggers: TriggerForFireResolver;
  outbound: OutboundSettings;
}

export function engineServices(container: Container, outbound: Partial<OutboundSettings> = {}): EngineServices {
  return {
    ...workerBasics(container),
    triggers: container.triggersForFire,
    outbound: {
      allow: outbound.allow ?? createAllowList(container.config.httpAllow),
      proxy: outbound.proxy !== undefined ? outbound.proxy : createOutboundProxy(container.config.httpProxy, container.config.httpNoProxy),
      backoff: outbound.backoff ?? DEFAULT_BACKOFF,
      timeoutMs: outbound.timeoutMs ?? 10_000,
    },
  };
}
