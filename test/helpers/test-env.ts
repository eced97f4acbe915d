import { afterAll, beforeAll, describe } from 'vitest';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { loadConfig } from '../../src/config.js';
import { createContainer, type Container } from '../../src/container.js';
import { buildApp } from '../../src/http/app.js';
import type { Api } from '../../src/http/types.js';
import { createLogger } from '../../src/lib/logger.js';
import { ensureTenant, createWorkspace, issueKey, revokeKey } from '../../src/modules/tenancy/tenancy.repository.js';
import { importBlueprint } from '../../src/modules/diagrams/diagram.repository.js';
import type { Clock } from '../../src/lib/clock.js';
import { freshStore, STORE_KINDS, type FreshStore, type StoreKind } from './stores.js';
import { randomBytes } from 'node:crypto';

export interface CallOptions {
  body?: unknown;
  /** A raw body sent as is (with the content type given in headers). */
  payload?: string | Buffer;
  headers?: Record<string, string>;
  key?: string | null;
}

/** A workspace of its own, with a full-access key, and a way to call the API as that key. */
export interface TestWorkspace {
  tenantId: string;
  workspaceId: string;
  keyId: string;
  key: string;
  call(method: InjectOptions['method'], url: string, options?: CallOptions): Promise<LightMyRequestResponse>;
  /** Another key of this workspace, with these scopes. */
  keyWith(scopes: string[]): Promise<{ keyId: string; key: string }>;
  revoke(keyId: string): Promise<void>;
  importBlueprint(blueprint: Record<string, unknown>): Promise<{ id: string; name: string; version: number }>;
}

export interface TestEnvOptions {
  env?: Record<string, string>;
  clock?: Clock;
}

/** One store, one container, one app: what an integration suite talks to. */
export class TestEnv {
  container!: Container;
  app!: Api;
  private store!: FreshStore;

  constructor(
    readonly kind: StoreKind,
    private readonly options: TestEnvOptions = {},
  ) {}

  async start(): Promise<void> {
    this.store = await freshStore(this.kind);
    const config = loadConfig({
      CAREPATH_DATABASE_URL: this.store.databaseUrl,
      CAREPATH_RATE_LIMIT: '100000/1s',
      ...this.options.env,
    });
    this.container = await createContainer(config, {
      storeOptions: this.store.storeOptions,
      logger: createLogger('silent'),
      clock: this.options.clock,
    });
    this.app = await buildApp(this.container);
    await this.app.ready();
  }

  async stop(): Promise<void> {
    await this.app?.close();
    await this.container?.close();
    await this.store?.dispose();
  }

  get db() {
    return this.container.db;
  }

  /** PostgreSQL: the schema this suite's store lives in (undefined on SQLite). */
  get schema(): string | undefined {
    return this.store.storeOptions.schema;
  }

  /** A new tenant (unless given) with a new workspace and a full-access key. */
  async workspace(tenantName?: string): Promise<TestWorkspace> {
    const at = new Date().toISOString();
    const db = this.container.db;
    const tenantId = await ensureTenant(db, tenantName ?? `tenant-${randomBytes(4).toString('hex')}`, at);
    const workspaceId = await createWorkspace(db, tenantId, `workspace-${randomBytes(4).toString('hex')}`, at);
    const workspaceRow = { id: workspaceId, tenant_id: tenantId };
    // Keys work only in the environment they were issued for: the deployment's.
    const environment = this.container.config.environment;
    const { keyId, key } = await issueKey(db, workspaceRow, 'test key', [], environment, at);
    const app = this.app;
    const call: TestWorkspace['call'] = (method, url, options = {}) => {
      const headers: Record<string, string> = { ...options.headers };
      const useKey = options.key === undefined ? key : options.key;
      if (useKey !== null && headers.authorization === undefined) headers.authorization = `Bearer ${useKey}`;
      let payload: string | Buffer | undefined = options.payload;
      if (options.body !== undefined) {
        payload = JSON.stringify(options.body);
        headers['content-type'] ??= 'application/json';
      }
      return app.inject({ method, url, headers, payload });
    };
    return {
      tenantId,
      workspaceId,
      keyId,
      key,
      call,
      keyWith: (scopes) => issueKey(db, workspaceRow, `key with ${scopes.join(' ') || 'no scopes'}`, scopes, environment, at),
      revoke: async (id) => {
        await revokeKey(db, id, new Date().toISOString());
      },
      importBlueprint: (blueprint) =>
        importBlueprint(db, workspaceId, { tags: [], swimlanes: [], ...blueprint } as never, new Date().toISOString()),
    };
  }
}

/**
 * Runs a suite once per store (SQLite, then PostgreSQL), each with its own fresh database,
 * the way Kysely runs its own tests over every dialect.
 */
export function describeEachStore(name: string, suite: (env: TestEnv) => void, options: TestEnvOptions = {}): void {
  for (const kind of STORE_KINDS) {
    describe(`${name} [${kind}]`, () => {
      const env = new TestEnv(kind, options);
      beforeAll(() => env.start());
      afterAll(() => env.stop());
      suite(env);
    });
  }
}

/** A minimal valid blueprint: start → one action → end. */
export function simpleBlueprint(name = 'Simple pathway', automations: unknown[] = []): Record<string, unknown> {
  return {
    name,
    tags: [],
    swimlanes: [],
    nodes: [
      { id: 'start', kind: 'start' },
      { id: 'act', kind: 'action', automations },
      { id: 'done', kind: 'end' },
    ],
    links: [
      { from: 'start', to: 'act' },
      { from: 'act', to: 'done' },
    ],
  };
}
