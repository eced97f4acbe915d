/**
 * The scale-out deployment as an operator runs it (docs/operations.md): two `carepath api` and
 * two `carepath worker` processes, started together from `bin/carepath.js` on one empty
 * PostgreSQL database, set up with `carepath admin`, driven over HTTP.
 *
 * PostgreSQL only: it is the store several processes share (SQLite is one process by rule;
 * cli-process.test.ts runs `carepath serve` on it). The same properties are tested inside one
 * process on both stores elsewhere; here they must hold between processes that share nothing
 * but the database: migrations, idempotency, the rate-limit budget, revocation, wake-ups,
 * deliveries, scheduled ticks, reconnection, and every run executed once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { freePort, runToEnd, start, waitFor, type Spawned } from '../helpers/cli-process.js';
import { POSTGRES_URL } from '../helpers/stores.js';
import { SIGNATURE_HEADER, signPayload } from '../../src/ingestion/signature.js';

/** Per key; a budget this small is spent within the test, and refills too slowly to matter. */
const BUDGET = 40;

const PATHWAY = {
  name: 'Scale-out pathway',
  tags: [],
  swimlanes: [],
  nodes: [
    { id: 'start', kind: 'start' },
    { id: 'prep', kind: 'action', automations: [{ id: 'note-n', type: 'set', with: { vars: { n: 'payload.n' } } }] },
    // A durable timer: the run is let go and claimed again when due, by whichever worker.
    { id: 'pause', kind: 'action', automations: [{ id: 'breathe', type: 'wait', with: { duration: 'PT1S' } }] },
    { id: 'mark', kind: 'action', automations: [{ id: 'marked', type: 'tag', with: { target: 'pathway', add: ['scaled-out'] } }] },
    { id: 'done', kind: 'end' },
  ],
  links: [
    { from: 'start', to: 'prep' },
    { from: 'prep', to: 'pause' },
    { from: 'pause', to: 'mark' },
    { from: 'mark', to: 'done' },
  ],
};

/** Started by each new patient: tags the patient, so search shows the run did its work. */
const WELCOME = {
  name: 'Welcome new patients',
  tags: [],
  swimlanes: [],
  nodes: [
    { id: 'start', kind: 'start' },
    { id: 'welcome', kind: 'action', automations: [{ id: 'welcomed', type: 'tag', with: { target: 'subject', add: ['welcomed'] } }] },
    { id: 'done', kind: 'end' },
  ],
  links: [
    { from: 'start', to: 'welcome' },
    { from: 'welcome', to: 'done' },
  ],
};

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

describe('scale-out: two `carepath api` and two `carepath worker` processes on one PostgreSQL database [postgres]', () => {
  const database = `carepath_scale_${randomBytes(5).toString('hex')}`;
  const databaseUrl = POSTGRES_URL.replace(/\/[^/]*$/, `/${database}`);
  const dir = mkdtempSync(join(tmpdir(), 'carepath-scale-'));
  const processes: Spawned[] = [];
  const apis: string[] = [];
  let db: pg.Client;
  let workspaceId: string;
  let triggerId: string;
  let welcomeSourceId: string;

  const call = async (api: string, key: string, method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> => {
    const res = await fetch(`${api}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}), ...options.headers },
      body: options.body !== undefined ? JSON.stringify(options.body) : undefined,
    });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  };

  /** A delivery as a sending system makes it: the raw body, signed now with the endpoint's secret. */
  const deliverSigned = (api: string, webhook: { webhookId: string; secret: string }, body: string, headers: Record<string, string> = {}) =>
    fetch(`${api}/v1/webhooks/${webhook.webhookId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers, [SIGNATURE_HEADER]: signPayload(webhook.secret, body) },
      body,
    });

  const admin = async (...args: string[]) => {
    const result = await runToEnd(['admin', ...args], { CAREPATH_DATABASE_URL: databaseUrl });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    return result.stdout;
  };
  const newKey = async (name: string) => JSON.parse(await admin('key', 'create', '--workspace', workspaceId, '--name', name, '--json')) as { keyId: string; key: string };

  beforeAll(async () => {
    const server = new pg.Client({ connectionString: POSTGRES_URL });
    await server.connect();
    await server.query(`create database ${database}`);
    await server.end();

    // All four at once on the empty database: each migrates it on start, and they must agree.
    const env = { CAREPATH_DATABASE_URL: databaseUrl, CAREPATH_RATE_LIMIT: `${BUDGET}/3600s`, CAREPATH_LOG_LEVEL: 'info' };
    const ports = [await freePort(), await freePort()];
    for (const port of ports) processes.push(start(['api'], { ...env, CAREPATH_PORT: String(port) }));
    processes.push(start(['worker'], env), start(['worker'], env));
    for (const [i, port] of ports.entries()) {
      await waitFor(processes[i], /carepath listening on/);
      apis.push(`http://127.0.0.1:${port}`);
    }
    await waitFor(processes[2], /carepath worker running/);
    await waitFor(processes[3], /carepath worker running/);

    db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();

    ({ workspaceId } = JSON.parse(await admin('workspace', 'create', '--tenant', 'Scale-out clinic', '--name', 'Ward 7', '--json')) as { workspaceId: string });
    const file = join(dir, 'pathway.json');
    writeFileSync(file, JSON.stringify(PATHWAY));
    const { id: sourceId } = JSON.parse(await admin('blueprint', 'import', file, '--workspace', workspaceId, '--json')) as { id: string };
    writeFileSync(file, JSON.stringify(WELCOME));
    ({ id: welcomeSourceId } = JSON.parse(await admin('blueprint', 'import', file, '--workspace', workspaceId, '--json')) as { id: string });
    const setup = await newKey('set-up');
    const created = await call(apis[0], setup.key, 'POST', '/v1/triggers', { body: { name: 'Scale-out', sourceId, type: 'web' } });
    expect(created.status).toBe(201);
    triggerId = created.body.triggerId as string;
  }, 120_000);

  afterAll(async () => {
    for (const spawned of processes) if (spawned.child.exitCode === null) spawned.child.kill('SIGKILL');
    await Promise.all(processes.map((spawned) => spawned.exited));
    await db?.end();
    const server = new pg.Client({ connectionString: POSTGRES_URL });
    await server.connect();
    await server.query(`drop database if exists ${database} with (force)`);
    await server.end();
    rmSync(dir, { recursive: true, force: true });
  });

  it('four processes started together on an empty database migrate it once and all answer', async () => {
    const { rows } = await db.query<{ name: string; n: string }>('select name, count(*) as n from kysely_migration group by name order by name');
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((row) => Number(row.n) === 1)).toBe(true);
    for (const api of apis) expect((await fetch(`${api}/readyz`)).status).toBe(200);
  });

  it('one Idempotency-Key fired at both API processes at once makes one run and one run.create event', async () => {
    const { key } = await newKey('idempotency');
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call(apis[i % 2], key, 'POST', `/v1/triggers/${triggerId}`, { body: { payload: { n: 0 } }, headers: { 'idempotency-key': 'admission-4711' } }),
      ),
    );
    const runIds = new Set(answers.map((answer) => answer.body.runId));
    expect(runIds.size).toBe(1);
    expect(answers.filter((answer) => answer.status === 201)).toHaveLength(1);
    expect(answers.filter((answer) => answer.status === 200 && answer.headers.get('idempotent-replayed') === 'true')).toHaveLength(19);
    const runs = await db.query('select id from runs where idempotency_key = $1', ['admission-4711']);
    expect(runs.rows.map((row) => row.id)).toEqual([...runIds]);
    const events = await db.query("select id from audit_events where action = 'run.create' and resource_id = $1", [[...runIds][0]]);
    expect(events.rows).toHaveLength(1);
  });

  it('runs fired through both API processes are each executed once by the workers, through a durable timer', async () => {
    const { key } = await newKey('load');
    const fired = await Promise.all(Array.from({ length: 30 }, (_, i) => call(apis[i % 2], key, 'POST', `/v1/triggers/${triggerId}`, { body: { payload: { n: i + 1 } } })));
    expect(fired.every((answer) => answer.status === 201)).toBe(true);
    const runIds = fired.map((answer) => answer.body.runId as string);
    await expect
      .poll(async () => (await db.query("select count(*) as n from runs where id = any($1) and automation_status = 'completed'", [runIds])).rows[0].n, { timeout: 30_000, interval: 200 })
      .toBe('30');
    const steps = await db.query<{ run_id: string; automation_id: string; attempt: number; outcome: string }>(
      'select run_id, automation_id, attempt, outcome from run_steps where run_id = any($1) order by run_id, started_at, automation_id',
      [runIds],
    );
    // Every automation of every run once, at its first attempt: no run was executed by two workers.
    expect(steps.rows).toHaveLength(90);
    for (const runId of runIds) {
      expect(steps.rows.filter((step) => step.run_id === runId).map((step) => [step.automation_id, step.attempt, step.outcome])).toEqual([
        ['note-n', 1, 'ok'],
        ['breathe', 1, 'elapsed'],
        ['marked', 1, 'ok'],
      ]);
    }
    const leased = await db.query('select id from runs where id = any($1) and lease_owner is not null', [runIds]);
    expect(leased.rows).toEqual([]);
    // Search, through either API process, sees each run's Pathway record with the tags the runs
    // left (the earlier test's run has ended the same way by now).
    const ended = await db.query("select id from runs where automation_status = 'completed'");
    expect(ended.rows.length).toBeGreaterThanOrEqual(30);
    for (const api of apis) {
      const search = await call(api, key, 'POST', '/v1/search', {
        body: { resourceType: 'Pathway', filters: [{ op: 'with', tag: 'scaled-out' }, { op: 'with', tag: 'completed' }], limit: 100 },
      });
      expect((search.body.results as { id: string }[]).map((hit) => hit.id).sort()).toEqual(ended.rows.map((row) => row.id).sort());
    }
  }, 60_000);

  it('an API process tells the workers of the runs it creates (a notification on carepath_runs)', async () => {
    const { key } = await newKey('wake-up');
    const listener = new pg.Client({ connectionString: databaseUrl });
    await listener.connect();
    try {
      await listener.query('listen carepath_runs');
      // Quiet first: the workers' own signals of earlier runs must not count for this fire.
      let last = Date.now();
      listener.on('notification', () => (last = Date.now()));
      await expect.poll(() => Date.now() - last >= 500, { timeout: 10_000, interval: 100 }).toBe(true);
      const heard = new Promise<number>((resolve) => listener.once('notification', () => resolve(Date.now())));
      const firedAt = Date.now();
      const fired = await call(apis[1], key, 'POST', `/v1/triggers/${triggerId}`, { body: { payload: { n: 99 } } });
      expect(fired.status).toBe(201);
      const heardAt = await Promise.race([heard, new Promise<null>((resolve) => setTimeout(() => resolve(null), 5_000))]);
      expect(heardAt).not.toBeNull();
      expect(heardAt! - firedAt).toBeLessThan(5_000);
    } finally {
      await listener.end();
    }
  });

  it('a delivery to one API process is processed by a worker once, replays to the other answer the same, and its events start runs', async () => {
    const { key } = await newKey('inbound');
    const webhook = await call(apis[0], key, 'POST', '/v1/webhooks', { body: { name: 'Admissions feed' } });
    expect(webhook.status).toBe(201);
    const feed = webhook.body as { webhookId: string; secret: string };
    const trigger = await call(apis[1], key, 'POST', '/v1/triggers', { body: { name: 'New patients', sourceId: welcomeSourceId, type: 'event', event: 'Patient.created' } });
    expect(trigger.status).toBe(201);

    const patient = (id: string, family: string) => ({ fullUrl: `urn:uuid:${id}`, resource: { resourceType: 'Patient', id, name: [{ family, given: ['Ada'] }] } });
    const body = JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: [patient('scale-p1', 'Lovelace'), patient('scale-p2', 'Byron')] });
    const deliver = (api: string) => deliverSigned(api, feed, body, { 'idempotency-key': 'admissions-0001' });
    const first = await deliver(apis[0]);
    expect(first.status).toBe(202);
    const accepted = await first.json();
    expect(accepted).toEqual({ accepted: 2, idempotencyKey: 'admissions-0001' });
    const replay = await deliver(apis[1]);
    expect(replay.status).toBe(202);
    expect(await replay.json()).toEqual(accepted);

    const deliveries = async () => (await call(apis[1], key, 'GET', `/v1/webhooks/${feed.webhookId}/deliveries`)).body.data as { status: string; runsStarted: number }[];
    await expect.poll(async () => (await deliveries()).map((delivery) => delivery.status), { timeout: 30_000, interval: 200 }).toEqual(['processed']);
    expect((await deliveries())[0].runsStarted).toBe(2);
    const runs = await db.query<{ automation_status: string }>('select automation_status from runs where idempotency_key = $1', ['admissions-0001']);
    expect(runs.rows).toHaveLength(2);
    await expect
      .poll(async () => (await db.query("select count(*) as n from runs where idempotency_key = $1 and automation_status = 'completed'", ['admissions-0001'])).rows[0].n, { timeout: 30_000, interval: 200 })
      .toBe('2');
    const welcomed = await call(apis[0], key, 'POST', '/v1/search', { body: { resourceType: 'Patient', filters: [{ op: 'with', tag: 'welcomed' }] } });
    expect((welcomed.body.results as { extId: string }[]).map((hit) => hit.extId).sort()).toEqual(['scale-p1', 'scale-p2']);
  }, 60_000);

  it('a scheduled search trigger ticks once across both worker processes: one run per patient of the cohort', async () => {
    const { key } = await newKey('schedule');
    const webhook = await call(apis[1], key, 'POST', '/v1/webhooks', { body: { name: 'Registration feed' } });
    const feed = webhook.body as { webhookId: string; secret: string };
    const member = (id: string) => ({ resource: { resourceType: 'Patient', id, meta: { tag: [{ code: 'Cohort 7' }] }, name: [{ family: id }] } });
    const body = JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: ['c7-a', 'c7-b', 'c7-c'].map(member) });
    const delivered = await deliverSigned(apis[0], feed, body, { 'content-type': 'application/fhir+json' });
    expect(delivered.status).toBe(202);
    const cohortCount = async () => (await call(apis[0], key, 'POST', '/v1/search/count', { body: { resourceType: 'Patient', filters: [{ op: 'with', tag: 'cohort-7' }] } })).body.total;
    await expect.poll(cohortCount, { timeout: 30_000, interval: 200 }).toBe(3);

    const query = await call(apis[0], key, 'POST', '/v1/queries', { body: { name: 'Cohort 7', resourceType: 'Patient', filters: [{ op: 'with', tag: 'cohort-7' }] } });
    expect(query.status).toBe(201);
    // The first tick a few seconds from now; both workers' schedulers look every second.
    const startAt = new Date(Math.ceil(Date.now() / 1000) * 1000 + 3_000).toISOString();
    const trigger = await call(apis[1], key, 'POST', '/v1/triggers', {
      body: { name: 'Cohort 7 every minute', sourceId: welcomeSourceId, type: 'search', queryId: query.body.queryId, schedule: { interval: 'PT1M', timezone: 'UTC', startAt } },
    });
    expect(trigger.status).toBe(201);
    const searchTriggerId = trigger.body.triggerId as string;
    const runsOfTick = async () =>
      (await db.query<{ idempotency_key: string; n: string }>('select idempotency_key, count(*) as n from runs where trigger_id = $1 group by idempotency_key', [searchTriggerId])).rows;
    await expect.poll(async () => (await runsOfTick()).reduce((sum, row) => sum + Number(row.n), 0), { timeout: 30_000, interval: 250 }).toBe(3);
    // Both schedulers have looked several times since: still one tick, three runs.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(await runsOfTick()).toEqual([{ idempotency_key: `schedule:${searchTriggerId}:${startAt}`, n: '3' }]);
  }, 90_000);

  it('both API processes spend one rate-limit budget per key', async () => {
    const { key } = await newKey('budget');
    const answers: Answer[] = [];
    for (let i = 0; i < BUDGET + 20; i++) answers.push(await call(apis[i % 2], key, 'GET', '/v1/me'));
    const allowed = answers.filter((answer) => answer.status === 200);
    const limited = answers.filter((answer) => answer.status === 429);
    expect(allowed.length + limited.length).toBe(answers.length);
    // Never more than the one budget (each process alone would have let all 60 through); a
    // token leased by one process and unused for a second may expire, so a few less is allowed.
    expect(allowed.length).toBeLessThanOrEqual(BUDGET);
    expect(allowed.length).toBeGreaterThanOrEqual(BUDGET - 4);
    expect(limited[0].body).toMatchObject({ code: 'rate_limited', error: expect.any(String), requestId: expect.any(String) });
    expect(Number(limited[0].headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('a key revoked with `carepath admin key revoke` is refused by both API processes on the next request', async () => {
    const { keyId, key } = await newKey('revoked-soon');
    for (const api of apis) expect((await call(api, key, 'GET', '/v1/me')).status).toBe(200);
    await admin('key', 'revoke', keyId);
    for (const api of apis) {
      const answer = await call(api, key, 'GET', '/v1/me');
      expect(answer.status).toBe(401);
      expect(answer.body).toMatchObject({ code: 'invalid_api_key', requestId: expect.any(String) });
    }
  });

  it('after the database drops every connection of every process, they reconnect: requests answer, fires run, notifications flow', async () => {
    const { key } = await newKey('reconnect');
    const dropped = await db.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()');
    expect(dropped.rows.length).toBeGreaterThanOrEqual(4);
    // A request may meet a connection the database has just closed: 503 store_unavailable with
    // Retry-After, never a 500; the next ones get new connections.
    const seen: Answer[] = [];
    for (const api of apis) {
      await expect
        .poll(
          async () => {
            const answer = await call(api, key, 'GET', '/v1/me');
            seen.push(answer);
            return answer.status;
          },
          { timeout: 15_000, interval: 250 },
        )
        .toBe(200);
    }
    for (const answer of seen.filter((answer) => answer.status !== 200)) {
      expect(answer.status).toBe(503);
      expect(answer.body).toMatchObject({ code: 'store_unavailable', error: expect.any(String), requestId: expect.any(String) });
      expect(answer.headers.get('retry-after')).toBe('1');
    }
    const listener = new pg.Client({ connectionString: databaseUrl });
    await listener.connect();
    try {
      await listener.query('listen carepath_runs');
      let heard = 0;
      listener.on('notification', () => heard++);
      const runIds: string[] = [];
      // Each API process's own NOTIFY connection comes back within a second or two.
      await expect
        .poll(
          async () => {
            const fired = await call(apis[runIds.length % 2], key, 'POST', `/v1/triggers/${triggerId}`, { body: { payload: { n: runIds.length } } });
            expect(fired.status).toBe(201);
            runIds.push(fired.body.runId as string);
            return heard > 0;
          },
          { timeout: 15_000, interval: 500 },
        )
        .toBe(true);
      await expect
        .poll(async () => (await db.query("select count(*) as n from runs where id = any($1) and automation_status = 'completed'", [runIds])).rows[0].n, { timeout: 30_000, interval: 250 })
        .toBe(String(runIds.length));
    } finally {
      await listener.end();
    }
  }, 60_000);

  it('SIGTERM stops every process cleanly, with exit code 0', async () => {
    for (const spawned of processes) spawned.child.kill('SIGTERM');
    const codes = await Promise.all(processes.map((spawned) => spawned.exited));
    // A failure shows what each process said on stderr.
    expect({ codes, stderr: processes.map((spawned) => spawned.stderr()) }).toEqual({ codes: [0, 0, 0, 0], stderr: ['', '', '', ''] });
  }, 60_000);
});
