/**
 * The serving SQLite connection's transactions begin IMMEDIATE (storage/immediate-sqlite-dialect.ts):
 * another connection to the same file (a `carepath admin` command in its own process) may commit
 * between a transaction's read and its write, and a deferred transaction would then fail at once
 * with SQLITE_BUSY_SNAPSHOT. An immediate one waits for the lock and never fails so.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { sql } from 'kysely';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/storage/connect.js';

let dir: string;
let file: string;
let store: Store;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'carepath-immediate-'));
  file = join(dir, 'carepath.db');
  store = openStore(`sqlite:${file}`);
  await sql`create table counters (id integer primary key, n integer not null)`.execute(store.db);
  await sql`create table notes (id integer primary key, body text not null)`.execute(store.db);
  await sql`insert into counters (id, n) values (1, 0)`.execute(store.db);
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

// Another writer on its own thread and connection, committing small transactions for a while,
// as an admin command in another process would.
const OTHER_WRITER = `
const { workerData, parentPort } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 5000');
const insert = db.prepare('insert into notes (body) values (?)');
const until = Date.now() + workerData.ms;
let n = 0;
while (Date.now() < until) { insert.run('from another process'); n++; }
db.close();
parentPort.postMessage(n);
`;

it('never fails a read-then-write transaction while another connection commits meanwhile', async () => {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const other = new Worker(OTHER_WRITER, { eval: true, workerData: { driver, file, ms: 1500 } });
  const otherCommits = new Promise<number>((resolve, reject) => {
    other.once('message', resolve);
    other.once('error', reject);
  });
  const outcomes: (Error | null)[] = [];
  for (let i = 0; i < 100; i++) {
    outcomes.push(
      await store.db
        .transaction()
        .execute(async (tx) => {
          const { rows } = await sql<{ n: number }>`select n from counters where id = 1`.execute(tx);
          // Give the other connection time to commit between this read and the write below.
          await new Promise((resolve) => setTimeout(resolve, 2));
          await sql`update counters set n = ${rows[0].n + 1} where id = 1`.execute(tx);
          return null;
        })
        .catch((error: Error) => error),
    );
  }
  expect(await otherCommits).toBeGreaterThan(0);
  expect(outcomes.filter((outcome) => outcome !== null).map((error) => error?.message)).toEqual([]);
  const { rows } = await sql<{ n: number }>`select n from counters where id = 1`.execute(store.db);
  expect(rows[0].n).toBe(100);
});

it('keeps the error that ended a transaction SQLite rolled back by itself (a full disk at COMMIT)', async () => {
  // As SQLite does when its COMMIT fails for want of room: the transaction is gone when the
  // error reaches Kysely, whose ROLLBACK then finds none.
  const full = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
  const failure = await store.db
    .transaction()
    .execute(async (tx) => {
      await sql`update counters set n = n + 1 where id = 1`.execute(tx);
      await sql`rollback`.execute(tx);
      throw full;
    })
    .then(() => null, (error: unknown) => error);
  expect(failure).toBe(full);
  // The connection works on.
  await store.db.transaction().execute((tx) => sql`update counters set n = n + 1 where id = 1`.execute(tx));
  expect((await sql<{ n: number }>`select n from counters where id = 1`.execute(store.db)).rows[0].n).toBe(1);
});
