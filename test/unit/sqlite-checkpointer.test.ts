import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterEach, expect, it } from 'vitest';
import { openStore, sqliteConnectionOf, type Store } from '../../src/storage/connect.js';
import { FALLBACK_AUTOCHECKPOINT_PAGES } from '../../src/storage/sqlite-checkpointer.js';

let dir: string | undefined;
let store: Store | undefined;

afterEach(async () => {
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  store = undefined;
  dir = undefined;
});

it('checkpoints the WAL from its own thread while the serving connection only appends', async () => {
  dir = mkdtempSync(join(tmpdir(), 'carepath-ckpt-'));
  const file = join(dir, 'db.sqlite');
  store = openStore(`sqlite:${file}`);
  const connection = sqliteConnectionOf(store.db)!;
  expect(connection.pragma('wal_autocheckpoint', { simple: true })).toBe(FALLBACK_AUTOCHECKPOINT_PAGES);

  await sql`create table t (id integer primary key, body blob not null)`.execute(store.db);
  const before = statSync(file).size;
  // About 200 WAL frames: far below the serving connection's own threshold, so only the
  // checkpointer thread can have copied them into the database file.
  for (let i = 0; i < 200; i++) await sql`insert into t (body) values (randomblob(3000))`.execute(store.db);

  // The file grows page by page while a checkpoint copies: wait for all of it, not the first page.
  const copied = before + 200 * 3000;
  const deadline = Date.now() + 10_000;
  while (statSync(file).size <= copied && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
  expect(statSync(file).size).toBeGreaterThan(copied);
  const rows = await sql<{ n: number }>`select count(*) as n from t`.execute(store.db);
  expect(rows.rows[0].n).toBe(200);
});

it('starts no checkpointer for an in-memory database', async () => {
  store = openStore('sqlite::memory:');
  const connection = sqliteConnectionOf(store.db)!;
  expect(connection.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
});
