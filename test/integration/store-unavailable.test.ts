/**
 * A request that meets a store that does not answer (SQLite locked by another process past its
 * busy timeout; a PostgreSQL connection cut under it) is answered 503 `store_unavailable` with
 * Retry-After, not 500; nothing of it is written, and the next request goes through.
 */
import net from 'node:net';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import Database from 'better-sqlite3';
import pg from 'pg';
import { describeEachStore, simpleBlueprint } from '../helpers/test-env.js';
import { webTriggerFor } from '../helpers/engine-harness.js';
import { openStore, postgresPoolOf, sqliteConnectionOf } from '../../src/storage/connect.js';
import { isTransientStoreError } from '../../src/lib/store-errors.js';

describeEachStore('a store that does not answer', (env) => {
  it('answers a fire 503 store_unavailable with Retry-After, writes nothing, and the next fire goes through', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, simpleBlueprint(), { autoStart: false });
    const runsOfTrigger = async () => Number((await env.db.selectFrom('runs').select((eb) => eb.fn.countAll<number>().as('n')).where('trigger_id', '=', triggerId).executeTakeFirstOrThrow()).n);

    let answer;
    if (env.kind === 'sqlite') {
      // Another process holds the write lock for longer than the service waits for it (5 s).
      const path = env.container.config.databaseUrl.slice('sqlite:'.length);
      const other = new Database(path);
      other.exec('begin immediate');
      try {
        answer = await ws.call('POST', `/v1/triggers/${triggerId}`, { body: { payload: { n: 1 } } });
      } finally {
        other.exec('rollback');
        other.close();
      }
    } else {
      // The fire waits behind a lock; then the database ends its connection, as in a failover.
      const schema = env.schema!;
      const locker = new pg.Client({ connectionString: env.container.config.databaseUrl });
      await locker.connect();
      try {
        await locker.query('begin');
        await locker.query(`lock table ${schema}.runs in access exclusive mode`);
        const pending = ws.call('POST', `/v1/triggers/${triggerId}`, { body: { payload: { n: 1 } } });
        await expect
          .poll(async () => {
            const waiting = await locker.query(
              "select pg_terminate_backend(pid) as ended from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()",
            );
            return waiting.rows.length;
          }, { timeout: 10_000, interval: 50 })
          .toBeGreaterThan(0);
        answer = await pending;
      } finally {
        await locker.query('rollback').catch(() => undefined);
        await locker.end();
      }
    }
    expect(answer.statusCode).toBe(503);
    expect(answer.json()).toEqual({ error: expect.stringContaining('retry'), code: 'store_unavailable', requestId: expect.any(String) });
    expect(answer.headers['retry-after']).toBe('1');
    expect(await runsOfTrigger()).toBe(0);

    const next = await ws.call('POST', `/v1/triggers/${triggerId}`, { body: { payload: { n: 2 } } });
    expect(next.statusCode).toBe(201);
    expect(await runsOfTrigger()).toBe(1);
  }, 30_000);

  it('answers 503 with Retry-After 30 when the store has no room to write; nothing is written, and the same key goes through once there is room', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, simpleBlueprint(), { autoStart: false });
    const fireWithKey = () =>
      ws.call('POST', `/v1/triggers/${triggerId}`, { body: { payload: { note: 'x'.repeat(200_000) } }, headers: { 'idempotency-key': 'full-disk-1' } });
    let answer;
    if (env.kind === 'sqlite') {
      // The file may not grow by a page: what a full disk does to SQLite (SQLITE_FULL).
      const connection = sqliteConnectionOf(env.db)!;
      const limit = connection.pragma('max_page_count', { simple: true }) as number;
      connection.pragma(`max_page_count = ${connection.pragma('page_count', { simple: true }) as number}`);
      try {
        answer = await fireWithKey();
      } finally {
        connection.pragma(`max_page_count = ${limit}`);
      }
    } else {
      // PostgreSQL's own error for a full disk (SQLSTATE 53100), raised where a write would extend a file.
      const schema = env.schema!;
      await sql.raw(`create function ${schema}.disk_full() returns trigger language plpgsql as $$
        begin raise exception 'could not extend file "base/1/2": No space left on device' using errcode = '53100'; end $$`).execute(env.db);
      await sql.raw(`create trigger disk_full before insert on ${schema}.runs for each statement execute function ${schema}.disk_full()`).execute(env.db);
      try {
        answer = await fireWithKey();
      } finally {
        await sql.raw(`drop trigger disk_full on ${schema}.runs`).execute(env.db);
      }
    }
    expect(answer.statusCode).toBe(503);
    expect(answer.json()).toEqual({ error: 'the database has no room to write; retry later', code: 'store_unavailable', requestId: expect.any(String) });
    expect(answer.headers['retry-after']).toBe('30');
    const written = await env.db.selectFrom('idempotency_keys').select('key').where('workspace_id', '=', ws.workspaceId).execute();
    expect(written).toEqual([]);
    expect((await ws.call('GET', `/v1/runs?triggerId=${triggerId}`)).json().data).toEqual([]);

    // Room again: the retry with the same key makes the run (201, not a replay of nothing).
    const retried = await fireWithKey();
    expect(retried.statusCode).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
  }, 30_000);
});

describeEachStore('PostgreSQL connections', (env) => {
  it('name themselves carepath, and a query that gets no connection in time fails as a passing store error', async () => {
    if (env.kind === 'sqlite') return; // one file, one connection: nothing to wait for
    const name = await sql<{ n: string }>`select current_setting('application_name') as n`.execute(env.db);
    expect(name.rows[0].n).toBe('carepath');

    // A pool of one whose connection is held: the next query waits for it, then gives up.
    const schema = env.schema;
    const store = openStore(env.container.config.databaseUrl, { schema, poolSize: 1, connectTimeoutMs: 200 });
    const held = await postgresPoolOf(store.db)!.connect();
    try {
      const started = Date.now();
      const failure = await sql`select 1`.execute(store.db).then(() => null, (error: unknown) => error);
      expect(isTransientStoreError(failure)).toBe(true);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      held.release();
      await store.close();
    }
  });

  it('end a statement that runs too long, in a transaction too, as a passing store error; nothing of it is applied', async () => {
    if (env.kind === 'sqlite') return;
    const store = openStore(env.container.config.databaseUrl, { schema: env.schema, poolSize: 1, queryTimeoutMs: 300 });
    const locker = new pg.Client({ connectionString: env.container.config.databaseUrl, options: `-c search_path=${env.schema}` });
    await locker.connect();
    try {
      await sql`create table slow_probe (v integer)`.execute(env.db);
      await sql`insert into slow_probe values (1)`.execute(env.db);
      // A lock held for long: the statements wait for it until the server ends them.
      await locker.query('begin');
      await locker.query('lock table slow_probe in access exclusive mode');
      const started = Date.now();
      const alone = await sql`update slow_probe set v = v + 100`.execute(store.db).then(() => null, (error: unknown) => error);
      expect(isTransientStoreError(alone)).toBe(true);
      const inTransaction = await store.db
        .transaction()
        .execute((tx) => sql`update slow_probe set v = v + 1000`.execute(tx))
        .then(() => null, (error: unknown) => error);
      expect(isTransientStoreError(inTransaction)).toBe(true);
      expect(Date.now() - started).toBeLessThan(5_000);
      await locker.query('commit');
      // Ended on the server: neither update is applied once the lock is gone, and the pool's one
      // connection works.
      expect((await sql<{ v: number }>`select v from slow_probe`.execute(store.db)).rows[0].v).toBe(1);
    } finally {
      await locker.query('rollback').catch(() => undefined);
      await locker.end();
      await store.close();
      await sql`drop table if exists slow_probe`.execute(env.db);
    }
  });

  it('give up on a query whose answer never comes (a database gone silent), and close its connection', async () => {
    if (env.kind === 'sqlite') return;
    const proxy = await freezableProxy(new URL(env.container.config.databaseUrl));
    const url = new URL(env.container.config.databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    const store = openStore(url.toString(), { schema: env.schema, poolSize: 1, queryTimeoutMs: 300, connectTimeoutMs: 500 });
    try {
      expect((await sql<{ one: number }>`select 1 as one`.execute(store.db)).rows[0].one).toBe(1);
      proxy.freeze();
      const started = Date.now();
      const alone = await sql`select 1`.execute(store.db).then(() => null, (error: unknown) => error);
      expect(isTransientStoreError(alone)).toBe(true);
      proxy.thaw();
      const inTransaction = await store.db
        .transaction()
        .execute(async (tx) => {
          proxy.freeze();
          await sql`select 1`.execute(tx);
        })
        .then(() => null, (error: unknown) => error);
      expect(isTransientStoreError(inTransaction)).toBe(true);
      expect(Date.now() - started).toBeLessThan(5_000);
      // The connections that waited were closed: once the network is back, a new one answers.
      proxy.thaw();
      expect((await sql<{ one: number }>`select 1 as one`.execute(store.db)).rows[0].one).toBe(1);
    } finally {
      await store.close();
      proxy.close();
    }
  });

  it('survive the database ending a connection that a transaction holds: the transaction fails, nothing crashes, the next query works', async () => {
    if (env.kind === 'sqlite') return;
    const admin = new pg.Client({ connectionString: env.container.config.databaseUrl });
    await admin.connect();
    try {
      const failure = await env.db
        .transaction()
        .execute(async (tx) => {
          const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(tx);
          await admin.query('select pg_terminate_backend($1)', [rows[0].pid]);
          // The connection's end reaches the client while the transaction still holds it.
          await new Promise((resolve) => setTimeout(resolve, 200));
          await sql`select 1`.execute(tx);
        })
        .then(() => null, (error: unknown) => error);
      expect(isTransientStoreError(failure)).toBe(true);
      const again = await sql<{ one: number }>`select 1 as one`.execute(env.db);
      expect(again.rows[0].one).toBe(1);
    } finally {
      await admin.end();
    }
  });
});

/**
 * A TCP proxy to PostgreSQL that can stop passing bytes while keeping its connections open: a
 * database gone silent, as after a failover that sent no reset.
 */
async function freezableProxy(target: URL): Promise<{ port: number; freeze(): void; thaw(): void; close(): void }> {
  let frozen = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
    }
    client.on('data', (chunk) => void (frozen || upstream.write(chunk)));
    upstream.on('data', (chunk) => void (frozen || client.write(chunk)));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    freeze: () => void (frozen = true),
    thaw: () => void (frozen = false),
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}
