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
import { createSecretBox } from '../lib/secret-box.js';
import { readSecrets } from '../modules/secrets/secret.repository.js';

export interface OutboundSettings {
  allow: AllowList;
  /** The forward proxy (CAREPATH_HTTP_PROXY), or null to connect directly. */
  proxy: OutboundProxy | null;
  backoff: BackoffPolicy;
  /** Per try, unless the automation sets `timeoutMs`. */
  timeoutMs: number;
  /** The values of a workspace's secrets named in http headers (`${secrets.NAME}`); missing names are absent. */
  secrets: (workspaceId: string, names: readonly string[]) => Promise<Map<string, string>>;
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
      secrets: outbound.secrets ?? workspaceSecretsReader(container),
    },
  };
}

/** Reads secrets from the store, opened with the deployment's key (CAREPATH_SECRET_KEY). */
function workspaceSecretsReader(container: Container): OutboundSettings['secrets'] {
  const box = createSecretBox(container.config.secretKey);
  return (workspaceId, names) => readSecrets(container.db, box, workspaceId, names);
}
