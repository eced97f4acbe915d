/**
 * The SQLite run writer's thread (engine/run-creation/sqlite-writer-thread.ts): a second writing
 * connection beside the serving one. What must hold: a batch's rows are visible to the serving
 * connection once its promise resolves; a failing batch writes nothing and the next one works;
 * a dead thread fails its batches and the next batch gets a new thread; and the serving
 * connection's read-then-write transactions never fail on a snapshot the thread made stale.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { sql } from 'kysely';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/storage/connect.js';
import { migrateToLatest } from '../../src/storage/migrate.js';
import { SqliteWriterThread } from '../../src/engine/run-creation/sqlite-writer-thread.js';
import { toRunRow, type RunRow } from '../../src/engine/run-creation/sqlite-run-rows.js';
import { auditRow } from '../../src/modules/audit/audit.repository.js';
import { systemContext } from '../../src/auth/context.js';
import { uuidv7 } from '../../src/lib/ids.js';
import type { PreparedRun } from '../../src/engine/run-creator.js';

let dir: string;
let file: string;
let store: Store;
let thread: SqliteWriterThread;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'carepath-writer-'));
  file = join(dir, 'carepath.db');
  store = openStore(`sqlite:${file}`);
  await migrateToLatest(store.db, 'sqlite');
  thread = new SqliteWriterThread(file);
});

afterEach(async () => {
  await thread.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const ctx = systemContext('tenant-1', 'workspace-1', 'request-1');

function runRow(claimKey?: string, runId = uuidv7(Date.now())): RunRow {
  const at = new Date().toISOString();
  const run: PreparedRun = {
    ctx,
    runId,
    triggerId: 'trigger-1',
    blueprint: { id: 'blueprint-1', name: 'Pathway', version: 1 },
    status: 'queued',
    payloadJson: '{"n":1}',
    subjectRecordId: null,
    idempotencyKey: claimKey ?? null,
    claim: claimKey ? { key: claimKey, fingerprint: 'f' } : null,
    origin: { via: 'test' },
    at,
  };
  return toRunRow(run, auditRow(ctx, at, { action: 'run.create', resourceType: 'run', resourceId: runId }));
}

async function count(table: 'runs' | 'records' | 'audit_events' | 'idempotency_keys'): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*) as n from ${sql.table(table)}`.execute(store.db);
  return rows[0].n;
}

it('writes a batch on its own connection; the serving connection sees it once the promise resolves', async () => {
  const rows = [runRow(), runRow('key-1'), runRow('key-1')];
  const outcomes = await thread.write(rows);
  expect(outcomes[0]).toEqual({ kind: 'created', runId: rows[0].runId });
  expect(outcomes[1]).toEqual({ kind: 'created', runId: rows[1].runId });
  // The second run with the same key is answered with the claim that stands.
  expect(outcomes[2]).toEqual({ kind: 'claimed-before', runId: rows[1].runId, fingerprint: 'f', triggerId: 'trigger-1' });
  expect(await count('runs')).toBe(2);
  expect(await count('records')).toBe(2);
  expect(await count('audit_events')).toBe(2);
  expect(await count('idempotency_keys')).toBe(1);
});

it('rejects a failing batch with SQLite error code, writes none of it, and goes on with the next', async () => {
  const [first] = await thread.write([runRow()]).then(() => [undefined]);
  expect(first).toBeUndefined();
  const taken = uuidv7(Date.now());
  await thread.write([runRow(undefined, taken)]);
  // The second row reuses a run id: the whole batch is one transaction and rolls back.
  const failing = thread.write([runRow(), runRow(undefined, taken)]);
  await expect(failing).rejects.toMatchObject({ code: expect.stringMatching(/^SQLITE_CONSTRAINT/) });
  expect(await count('runs')).toBe(2);
  expect(await count('audit_events')).toBe(2);
  const outcomes = await thread.write([runRow()]);
  expect(outcomes[0].kind).toBe('created');
  expect(await count('runs')).toBe(3);
});

it('fails the batches of a thread that died and starts a new thread for the next batch', async () => {
  await thread.write([runRow()]);
  const worker = (thread as unknown as { thread: { worker: Worker } }).thread.worker;
  const pending = thread.write(Array.from({ length: 200 }, () => runRow()));
  await worker.terminate();
  // The batch either committed before the thread died or is rejected; never half-written.
  const settled = await pending.then(
    () => 'written',
    (error: Error) => error.message,
  );
  const runs = await count('runs');
  if (settled === 'written') expect(runs).toBe(201);
  else {
    expect(settled).toMatch(/run writer thread stopped/);
    expect([1, 201]).toContain(runs);
  }
  const outcomes = await thread.write([runRow()]);
  expect(outcomes[0].kind).toBe('created');
});

it('never fails a read-then-write transaction of the serving connection while the thread commits', async () => {
  await sql`create table counters (id integer primary key, n integer not null)`.execute(store.db);
  await sql`insert into counters (id, n) values (1, 0)`.execute(store.db);
  const increments = Array.from({ length: 100 }, () =>
    store.db.transaction().execute(async (tx) => {
      const { rows } = await sql<{ n: number }>`select n from counters where id = 1`.execute(tx);
      // Let the thread commit between this transaction's read and its write.
      await new Promise((resolve) => setImmediate(resolve));
      await sql`update counters set n = ${rows[0].n + 1} where id = 1`.execute(tx);
    }),
  );
  const batches = Array.from({ length: 50 }, () => thread.write([runRow(), runRow()]));
  await Promise.all([...increments, ...batches]);
  const { rows } = await sql<{ n: number }>`select n from counters where id = 1`.execute(store.db);
  expect(rows[0].n).toBe(100);
  expect(await count('runs')).toBe(100);
});
