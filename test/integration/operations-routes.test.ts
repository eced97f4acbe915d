import { expect, it, onTestFinished } from 'vitest';
import { describeEachStore, simpleBlueprint } from '../helpers/test-env.js';
import { fire, webTriggerFor } from '../helpers/engine-harness.js';
import { createEndpoint, deliver, savedQuery, searchTrigger } from '../helpers/deliveries.js';
import { measureClockSkew, skewWarning, watchClockSkew } from '../../src/storage/clock-skew.js';
import { createLogger } from '../../src/lib/logger.js';
import { sample } from '../helpers/metrics.js';
import { Registry } from 'prom-client';
import { openStore } from '../../src/storage/connect.js';
import { registerStoreGauges } from '../../src/http/plugins/store-metrics.js';
import { systemClock } from '../../src/lib/clock.js';
import { buildApp } from '../../src/http/app.js';
import Fastify from 'fastify';
import { registerHealthRoutes } from '../../src/http/routes/health.js';
import type { Api } from '../../src/http/types.js';
import type { Container } from '../../src/container.js';
import { capturedLogger } from '../helpers/log-capture.js';

describeEachStore('operations routes (/healthz, /readyz, /metrics)', (env) => {
  it('answers /healthz and /readyz without a key and reveals nothing else', async () => {
    const health = await env.app.inject({ method: 'GET', url: '/healthz' });
    expect(health.statusCode).toBe(200);
    expect(health.json()).toEqual({ status: 'ok' });
    const ready = await env.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ status: 'ready' });
  });

  it('counts and times requests by method, route pattern and status, never by raw URL', async () => {
    const ws = await env.workspace();
    const before = await env.app.inject({ method: 'GET', url: '/metrics' });
    const counted = (text: string, labels: Record<string, string>) => sample(text, 'carepath_http_requests_total', labels) ?? 0;
    const runRoute = { method: 'GET', route: '/v1/runs/:runId', status: '404' };
    const meRoute = { method: 'GET', route: '/v1/me', status: '200' };
    const startRuns = counted(before.body, runRoute);
    const startMe = counted(before.body, meRoute);

    const missingRun = '0190c0de-0000-7000-8000-000000000001';
    for (let i = 0; i < 3; i++) expect((await ws.call('GET', `/v1/runs/${missingRun}`)).statusCode).toBe(404);
    expect((await ws.call('GET', '/v1/me')).statusCode).toBe(200);
    expect((await ws.call('GET', '/v1/me', { key: null })).statusCode).toBe(401);

    const res = await env.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(counted(res.body, runRoute)).toBe(startRuns + 3);
    expect(counted(res.body, meRoute)).toBe(startMe + 1);
    expect(counted(res.body, { method: 'GET', route: '/v1/me', status: '401' })).toBeGreaterThanOrEqual(1);
    // The latency histogram has a series per route, and every request landed in +Inf.
    const timed = sample(res.body, 'carepath_http_request_duration_seconds_count', { method: 'GET', route: '/v1/runs/:runId' });
    expect(timed).toBeGreaterThanOrEqual(3);
    expect(sample(res.body, 'carepath_http_request_duration_seconds_bucket', { le: '+Inf', method: 'GET', route: '/v1/runs/:runId' })).toBe(timed);
    // Ids, keys and workspaces stay out of the labels.
    expect(res.body).not.toContain(missingRun);
    expect(res.body).not.toContain(ws.workspaceId);
    expect(res.body).not.toContain(ws.key);
    // Node's process metrics are there too.
    expect(res.body).toContain('process_cpu_user_seconds_total');
  });

  it('shows the work waiting in the store: deliveries, due runs and their wait, the unfolded change log', async () => {
    const gauges = async () => {
      const text = (await env.app.inject({ method: 'GET', url: '/metrics' })).body;
      const value = (name: string) => sample(text, name);
      return {
        waiting: value('carepath_deliveries_waiting'),
        failed: value('carepath_deliveries_failed'),
        due: value('carepath_runs_due'),
        oldest: value('carepath_runs_due_oldest_seconds'),
        unfolded: value('carepath_tag_changes_unfolded'),
        overdueTick: value('carepath_schedule_tick_overdue_seconds'),
      };
    };
    const before = await gauges();
    expect(before.waiting).toBeGreaterThanOrEqual(0);
    expect(before.due).toBeGreaterThanOrEqual(0);

    // No worker, processor or folder runs in this app: what is stored stays waiting.
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, simpleBlueprint());
    await fire(ws, triggerId, { n: 1 });
    await fire(ws, triggerId, { n: 2 });
    const feed = await createEndpoint(ws);
    for (const id of ['m1', 'm2']) expect((await deliver(env, feed, { resourceType: 'Patient', id })).statusCode).toBe(202);
    const first = await env.db.selectFrom('deliveries').select('id').where('webhook_id', '=', feed.webhookId).orderBy('id').limit(1).executeTakeFirstOrThrow();
    await env.db.updateTable('deliveries').set({ status: 'failed', error: 'failed for the test' }).where('id', '=', first.id).execute();
    // A schedule tick a minute overdue (no scheduler runs in this app).
    const { queryId } = await savedQuery(ws, 'Patient');
    const ticking = await searchTrigger(ws, queryId, { schedule: { interval: 'PT1H', timezone: 'UTC' } });
    await env.db.updateTable('triggers').set({ next_run_at: new Date(Date.now() - 60_000).toISOString() }).where('id', '=', ticking.triggerId).execute();
    // One read serves a scrape, and is reused for a second: wait it out.
    await new Promise((resolve) => setTimeout(resolve, 1_100));

    const after = await gauges();
    expect(after.due).toBe(before.due! + 2);
    expect(after.oldest).toBeGreaterThanOrEqual(0);
    expect(after.waiting).toBe(before.waiting! + 1);
    expect(after.failed).toBe(before.failed! + 1);
    expect(before.overdueTick).toBe(0);
    expect(after.overdueTick).toBeGreaterThanOrEqual(60);
    // Two Pathway records and their status tags entered the change log.
    expect(after.unfolded).toBeGreaterThanOrEqual(before.unfolded! + 4);
  });

  it("ends each request's log line with the answer's error code and who asked: key and workspace, or the webhook endpoint", async () => {
    const ws = await env.workspace();
    const feed = await createEndpoint(ws);
    const { logger, lines } = capturedLogger('info');
    const app = await buildApp({ ...env.container, logger }, { logRequests: true });
    onTestFinished(() => app.close());
    const get = (url: string, key?: string) => app.inject({ method: 'GET', url, headers: key ? { authorization: `Bearer ${key}` } : {} });
    await get('/v1/me', ws.key);
    await get('/v1/runs/0190c0de-0000-7000-8000-000000000001', ws.key);
    await get('/v1/me', 'cpk_staging_notakey');
    // Refused after the key was looked up: the line still names it (a key being rotated out is found so).
    const readOnly = await ws.keyWith(['runs:read']);
    await get('/v1/triggers', readOnly.key);
    const body = JSON.stringify({ resourceType: 'Patient', id: 'logged-p' });
    await app.inject({ method: 'POST', url: `/v1/webhooks/${feed.webhookId}`, headers: { 'content-type': 'application/json', 'x-service-signature': 't=1,v1=00' }, payload: body });
    const completed = lines.filter((line) => line.msg === 'request completed');
    const shown = completed.map((line) => [(line.res as { statusCode: number }).statusCode, line.code, line.keyId, line.workspaceId, line.webhookId]);
    expect(shown).toEqual([
      [200, undefined, ws.keyId, ws.workspaceId, undefined],
      [404, 'not_found', ws.keyId, ws.workspaceId, undefined],
      [401, 'invalid_api_key', undefined, undefined, undefined],
      [403, 'insufficient_scope', readOnly.keyId, ws.workspaceId, undefined],
      [401, 'invalid_signature', undefined, undefined, feed.webhookId],
    ]);
    expect(JSON.stringify(lines)).not.toContain(ws.key);
    expect(JSON.stringify(lines)).not.toContain('logged-p');
  });

  it('says in the log why /readyz is 503 (at most every 30 s), and when it is ready again', async () => {
    const { logger, lines } = capturedLogger('info');
    // Nothing listens on port 1: every read fails as in an outage, until the store is back.
    const down = openStore('postgres://carepath@127.0.0.1:1/nothing');
    onTestFinished(() => down.close());
    let db = down.db;
    const app = Fastify();
    registerHealthRoutes(app as unknown as Api, { logger, get db() { return db; } } as unknown as Container);
    const ready = async () => (await app.inject({ method: 'GET', url: '/readyz' })).statusCode;
    expect([await ready(), await ready(), await ready()]).toEqual([503, 503, 503]);
    db = env.db;
    expect(await ready()).toBe(200);
    expect(await ready()).toBe(200);
    expect(lines.map((line) => [line.level, line.msg, (line.err as { code?: string } | undefined)?.code])).toEqual([
      [40, 'not ready: the store does not answer', 'ECONNREFUSED'],
      [30, 'ready again: the store answers', undefined],
    ]);
  });

  it('leaves the store gauges out of a scrape when the store does not answer, and says so in carepath_store_up', async () => {
    const up = (await env.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(sample(up, 'carepath_store_up')).toBe(1);
    // A store whose every read of the work fails (it holds no tables), as in an outage.
    const store = env.kind === 'sqlite' ? openStore('sqlite::memory:') : openStore(env.container.config.databaseUrl, { schema: 'carepath_no_such_schema' });
    onTestFinished(() => store.close());
    const registry = new Registry();
    registerStoreGauges(registry, store.db, systemClock);
    const down = await registry.metrics();
    expect(sample(down, 'carepath_store_up')).toBe(0);
    // Not 0 (a backlog that looks drained, and clears the alerts on it): no sample at all.
    for (const name of ['carepath_deliveries_waiting', 'carepath_deliveries_failed', 'carepath_runs_due', 'carepath_runs_due_oldest_seconds', 'carepath_runs_failing', 'carepath_schedule_tick_overdue_seconds', 'carepath_tag_changes_unfolded']) {
      expect(sample(down, name), name).toBeUndefined();
    }
  });

  it("compares this machine's clock with the database's (PostgreSQL), and says so in the log when they disagree", async () => {
    const metrics = (await env.app.inject({ method: 'GET', url: '/metrics' })).body;
    if (env.kind === 'sqlite') {
      // One process on one machine: nothing to compare.
      expect(await measureClockSkew(env.db)).toBeNull();
      expect(metrics).not.toContain('carepath_clock_ahead_seconds');
      return;
    }
    const here = await measureClockSkew(env.db);
    expect(Math.abs(here!.aheadMs)).toBeLessThan(1_000);
    expect(skewWarning(here!)).toBeNull();
    expect(Math.abs(sample(metrics, 'carepath_clock_ahead_seconds')!)).toBeLessThan(1);

    // A machine 45 s ahead, then one 3 s behind.
    const ahead = await measureClockSkew(env.db, () => Date.now() + 45_000);
    expect(ahead!.aheadMs).toBeGreaterThan(44_000);
    expect(ahead!.aheadMs).toBeLessThan(46_000);
    const lines: string[] = [];
    const logger = createLogger('warn', { write: (line: string) => void lines.push(line) });
    const stop = watchClockSkew(env.db, logger, { now: () => Date.now() - 3_000 });
    await expect.poll(() => lines.length).toBe(1);
    stop();
    expect(JSON.parse(lines[0])).toMatchObject({
      level: 40,
      component: 'clock',
      msg: "this machine's clock is 3.0 s behind the database's: leases, timers and schedules assume the clocks of all carepath machines agree; sync this one (NTP)",
    });
  });
});
