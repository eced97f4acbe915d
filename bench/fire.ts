/**
 * Fire-trigger throughput and latency (issue: management API). Baselines measured in the same
 * run: a bare Fastify route (both stores) and, for PostgreSQL, a plain 50-client single-row
 * insert loop. Half of the fires carry a fresh Idempotency-Key, so the claim path is exercised.
 * Each baseline is measured right before and right after the fires it is compared with, and
 * the ratio uses their mean: this machine's speed drifts within minutes.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type autocannon from 'autocannon';
import type { BenchSuite } from './reporter.js';
import { benchStore, commandCpuMs, load, startServer, threadCpuMs, POSTGRES_URL, type BenchStore } from './harness.js';
import { ensureTenant, createWorkspace, issueKey } from '../src/modules/tenancy/tenancy.repository.js';
import { importBlueprint } from '../src/modules/diagrams/diagram.repository.js';
import { createTrigger } from '../src/modules/triggers/trigger.service.js';
import { systemContext } from '../src/auth/context.js';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 8);
const CONNECTIONS = 50;
/** BENCH_FIRE_STORES=sqlite (or postgres) measures one store only. */
const FIRE_STORES = (process.env.BENCH_FIRE_STORES ?? 'sqlite,postgres')
  .split(',')
  .filter((kind): kind is 'sqlite' | 'postgres' => kind === 'sqlite' || kind === 'postgres');

async function seedWebTrigger(store: BenchStore): Promise<{ key: string; triggerId: string }> {
  const container = await store.open();
  const db = container.db;
  const at = new Date().toISOString();
  const tenantId = await ensureTenant(db, 'bench', at);
  const workspaceId = await createWorkspace(db, tenantId, 'bench', at);
  const { key } = await issueKey(db, { id: workspaceId, tenant_id: tenantId }, 'bench', [], 'staging', at);
  const blueprint = await importBlueprint(
    db,
    workspaceId,
    {
      name: 'Bench pathway',
      tags: [],
      swimlanes: [],
      nodes: [
        { id: 'start', kind: 'start' },
        { id: 'done', kind: 'end' },
      ],
      links: [{ from: 'start', to: 'done' }],
    } as never,
    at,
  );
  const trigger = await createTrigger(
    db,
    systemContext(tenantId, workspaceId, 'bench'),
    // autoStart false: the API alone is measured here; the engine has its own benchmark.
    { name: 'bench', sourceId: blueprint.id, type: 'web', autoStart: false },
    new Date(),
  );
  await container.close();
  return { key, triggerId: trigger.triggerId };
}

async function fireLoad(store: BenchStore) {
  const { key, triggerId } = await seedWebTrigger(store);
  const server = await startServer('bench/servers/api-server.ts', store.env);
  let n = 0;
  const options = {
    url: `http://127.0.0.1:${server.port}/v1/triggers/${triggerId}`,
    method: 'POST' as const,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    requests: [
      {
        setupRequest: (request: autocannon.Request) => {
          n++;
          const headers = { ...request.headers } as Record<string, string>;
          if (n % 2 === 0) headers['idempotency-key'] = randomUUID();
          return { ...request, headers, body: JSON.stringify({ payload: { n, riskScore: n % 10 } }) };
        },
      },
    ],
  };
  await load({ ...options, duration: 2 });
  const before = threadCpuMs(server.pid);
  const postgresBefore = commandCpuMs('postgres');
  const loadBefore = process.cpuUsage();
  const result = await load({ ...options, duration: DURATION_S, connections: CONNECTIONS });
  const loadCpu = process.cpuUsage(loadBefore);
  const postgresMs = commandCpuMs('postgres') - postgresBefore;
  const after = threadCpuMs(server.pid);
  await server.stop();
  const requests = result.requestsPerSecond * DURATION_S;
  const cpuPerRequest = [...after].map(([thread, ms]) => [thread, ((ms - (before.get(thread) ?? 0)) * 1000) / requests] as const);
  return {
    ...result,
    cpuPerRequest,
    postgresCpuPerRequest: (postgresMs * 1000) / requests,
    loadGeneratorCpuPerRequest: (loadCpu.user + loadCpu.system) / requests,
  };
}

/** 50 clients, each inserting one row per statement as fast as it can, for the bench duration. */
async function plainInsertLoop(schema: string): Promise<{ rowsPerSecond: number; postgresCpuPerRow: number }> {
  const setup = new pg.Client({ connectionString: POSTGRES_URL });
  await setup.connect();
  await setup.query(`create table if not exists ${schema}.insert_baseline (id text primary key, body text not null, created_at text not null)`);
  await setup.end();
  const clients = await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      return client;
    }),
  );
  let inserted = 0;
  const postgresBefore = commandCpuMs('postgres');
  const deadline = Date.now() + DURATION_S * 1000;
  await Promise.all(
    clients.map(async (client) => {
      while (Date.now() < deadline) {
        await client.query(`insert into ${schema}.insert_baseline (id, body, created_at) values ($1, $2, $3)`, [
          randomUUID(),
          '{"n":1}',
          new Date().toISOString(),
        ]);
        inserted++;
      }
    }),
  );
  const postgresMs = commandCpuMs('postgres') - postgresBefore;
  await Promise.all(clients.map((client) => client.end()));
  return { rowsPerSecond: inserted / DURATION_S, postgresCpuPerRow: (postgresMs * 1000) / inserted };
}

const suite: BenchSuite = async (reporter) => {
  reporter.section('Fire a web trigger (HTTP, 50 connections, half with Idempotency-Key)');
  const bareServer = await startServer('bench/servers/bare-server.ts');
  const bareOptions = {
    url: `http://127.0.0.1:${bareServer.port}/bare`,
    method: 'POST' as const,
    headers: { 'content-type': 'application/json' },
    body: '{"payload":{"n":1}}',
  };
  await load({ ...bareOptions, duration: 2 });
  const bareRoute = async () => (await load({ ...bareOptions, duration: DURATION_S, connections: CONNECTIONS })).requestsPerSecond;

  for (const kind of FIRE_STORES) {
    const store = await benchStore(kind);
    const bareBefore = await bareRoute();
    const insertsBefore = kind === 'postgres' ? await plainInsertLoop(store.schema!) : undefined;
    const fire = await fireLoad(store);
    const bareAfter = await bareRoute();
    const insertsAfter = kind === 'postgres' ? await plainInsertLoop(store.schema!) : undefined;
    const bare = (bareBefore + bareAfter) / 2;
    reporter.figure(`bare Fastify route, before and after the fires on ${kind} (mean)`, bare, 'req/s');
    reporter.note(`bare Fastify route: ${Math.round(bareBefore)} req/s before, ${Math.round(bareAfter)} after`);
    reporter.figure(`fire on ${kind}`, fire.requestsPerSecond, 'req/s');
    reporter.figure(`fire on ${kind} latency p50`, fire.p50, 'ms');
    reporter.figure(`fire on ${kind} latency p99`, fire.p99, 'ms');
    for (const [thread, us] of fire.cpuPerRequest.filter(([, us]) => us >= 1).sort((a, b) => b[1] - a[1])) {
      reporter.figure(`fire on ${kind}: server CPU per request, thread ${thread}`, us, 'µs');
    }
    reporter.figure(`fire on ${kind}: load generator (autocannon) CPU per request`, fire.loadGeneratorCpuPerRequest, 'µs');
    if (kind === 'postgres') reporter.figure('fire on postgres: PostgreSQL server CPU per request', fire.postgresCpuPerRequest, 'µs');
    if (fire.non2xx || fire.errors) reporter.note(`fire on ${kind}: ${fire.non2xx} non-2xx answers, ${fire.errors} errors`);
    reporter.ratio(`fire on ${kind} ÷ bare route`, fire.requestsPerSecond, bare, kind === 'sqlite' ? '≥ 0.20' : undefined);
    if (insertsBefore && insertsAfter) {
      const rows = (insertsBefore.rowsPerSecond + insertsAfter.rowsPerSecond) / 2;
      reporter.figure('plain 50-client single-row insert loop (PostgreSQL), before and after the fires (mean)', rows, 'rows/s');
      reporter.note(`insert loop: ${Math.round(insertsBefore.rowsPerSecond)} rows/s before, ${Math.round(insertsAfter.rowsPerSecond)} after`);
      reporter.figure('insert loop: PostgreSQL server CPU per row', (insertsBefore.postgresCpuPerRow + insertsAfter.postgresCpuPerRow) / 2, 'µs');
      reporter.ratio('fire on postgres ÷ insert loop', fire.requestsPerSecond, rows, '≥ 0.6');
    }
    await store.drop();
  }
  await bareServer.stop();
};

export default suite;
