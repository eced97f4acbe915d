/**
 * A long-running command started before its PostgreSQL server is up waits for it (a minute at
 * most) and starts when it answers; one the server refuses stops at once (cli/wait-for-store.ts).
 * PostgreSQL only: a SQLite file is there or not, and is never waited for (cli-process.test.ts).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { freePort, start, waitFor, type Spawned } from '../helpers/cli-process.js';
import { POSTGRES_URL } from '../helpers/stores.js';

/** Listens on `port` and pipes every connection to the PostgreSQL server the tests use. */
function forwarderTo(port: number): Promise<{ close: () => Promise<void> }> {
  const target = new URL(POSTGRES_URL);
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => socket.destroy());
    }
    client.pipe(upstream).pipe(client);
  });
  return new Promise((resolve) =>
    server.listen(port, '127.0.0.1', () =>
      resolve({
        close: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy();
            server.close(() => done());
          }),
      }),
    ),
  );
}

describe('waiting for the store at start [postgres]', () => {
  const database = `carepath_wait_${randomBytes(4).toString('hex')}`;
  const running: Spawned[] = [];
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    const server = new pg.Client({ connectionString: POSTGRES_URL });
    await server.connect();
    await server.query(`create database ${database}`);
    await server.end();
  });
  afterEach(async () => {
    for (const spawned of running.splice(0)) if (spawned.child.exitCode === null) spawned.child.kill('SIGKILL');
    for (const close of closers.splice(0)) await close();
  });
  afterAll(async () => {
    const server = new pg.Client({ connectionString: POSTGRES_URL });
    await server.connect();
    await server.query(`drop database if exists ${database} with (force)`);
    await server.end();
  });

  it('a worker started while nothing listens says what it waits for, and starts when PostgreSQL answers', async () => {
    const port = await freePort();
    const target = new URL(POSTGRES_URL);
    const url = `postgres://${target.username}${target.password ? `:${target.password}` : ''}@127.0.0.1:${port}/${database}`;
    const worker = start(['worker'], { CAREPATH_DATABASE_URL: url, CAREPATH_LOG_LEVEL: 'info' });
    running.push(worker);
    await waitFor(worker, /waiting for the store: cannot open the store .*nothing listens there/);
    // Still waiting a few seconds on, not exited.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(worker.child.exitCode).toBeNull();
    const forwarder = await forwarderTo(port);
    closers.push(forwarder.close);
    await waitFor(worker, /carepath worker running/);
    expect(worker.stdout()).toMatch(/"msg":"the store answers: starting"/);
    // Said once, not once per try (a try every 2 s).
    expect(worker.stdout().match(/waiting for the store/g)?.length).toBe(1);
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  }, 90_000);

  it('a database that does not exist is not waited for: the worker stops at once, saying so', async () => {
    const target = new URL(POSTGRES_URL);
    target.pathname = `/${database}_missing`;
    const started = Date.now();
    const worker = start(['worker'], { CAREPATH_DATABASE_URL: target.toString() });
    running.push(worker);
    expect(await worker.exited).toBe(1);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(worker.stderr()).toContain('the database does not exist; create it first (createdb)');
    expect(worker.stdout()).not.toMatch(/waiting for the store/);
  }, 60_000);
});
