/**
 * A delivery whose processing meets a full store (SQLite's file may not grow; PostgreSQL's
 * SQLSTATE 53100) waits for room however many times that happens: it is never marked `failed`
 * for it, its attempts are given back, it shows why it waits, and once there is room it is
 * processed as if nothing had happened.
 */
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { createEndpoint, deliver, lastDelivery, processorFor, search } from '../helpers/deliveries.js';
import { sqliteConnectionOf } from '../../src/storage/connect.js';

const patients = (n: number) => ({
  resourceType: 'Bundle',
  type: 'collection',
  entry: Array.from({ length: n }, (_, i) => ({
    resource: { resourceType: 'Patient', id: `full-${i}`, name: [{ given: ['Grace'], family: `Hopper-${i}-${'x'.repeat(200)}` }] },
  })),
});

describeEachStore('a delivery that meets a full store', (env) => {
  it('waits for room without using up its attempts, then is processed', async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    const body = patients(1000);
    expect((await deliver(env, endpoint, body, { key: 'full-1' })).statusCode).toBe(202);
    const row = () => env.db.selectFrom('deliveries').select(['status', 'attempts', 'error', 'lease_expires_at']).where('webhook_id', '=', endpoint.webhookId).executeTakeFirstOrThrow();
    // One try allowed: without the rule, the second try would mark it failed.
    const processor = processorFor(env, { maxAttempts: 1 });

    const makeFull = async (): Promise<() => Promise<void>> => {
      if (env.kind === 'sqlite') {
        // The database file may grow a little only: enough for a claim (SQLite rewrites the whole
        // row, stored body and all), far from enough for 1,000 patients' records (each name
        // twice: the row and its order index), tags and states.
        const connection = sqliteConnectionOf(env.db)!;
        const limit = connection.pragma('max_page_count', { simple: true }) as number;
        const bodyPages = Math.ceil(JSON.stringify(body).length / 4096);
        connection.pragma(`max_page_count = ${(connection.pragma('page_count', { simple: true }) as number) + Math.ceil(bodyPages * 1.3) + 16}`);
        return async () => void connection.pragma(`max_page_count = ${limit}`);
      }
      // PostgreSQL's own error for a full disk, where a record would be written.
      const schema = env.schema!;
      await sql.raw(`create function ${schema}.disk_full() returns trigger language plpgsql as $$
        begin raise exception 'could not extend file "base/1/2": No space left on device' using errcode = '53100'; end $$`).execute(env.db);
      await sql.raw(`create trigger disk_full before insert on ${schema}.records for each statement execute function ${schema}.disk_full()`).execute(env.db);
      return async () => void (await sql.raw(`drop trigger disk_full on ${schema}.records`).execute(env.db));
    };

    const makeRoom = await makeFull();
    try {
      for (let attempt = 0; attempt < 3; attempt++) {
        expect(await processor.processBatch()).toBe(1);
        const waiting = await row();
        expect(waiting).toMatchObject({ status: 'processing', attempts: 0, error: 'waiting for the database: it has no room to write' });
        // It waits about 30 s for room; let that time pass.
        expect(Date.parse(waiting.lease_expires_at!) - Date.now()).toBeGreaterThan(20_000);
        await env.db.updateTable('deliveries').set({ lease_expires_at: new Date(0).toISOString() }).where('webhook_id', '=', endpoint.webhookId).execute();
      }
      expect((await lastDelivery(ws, endpoint)).status).toBe('processing');
      expect((await search(ws, 'Patient')).total).toBe(0);
    } finally {
      await makeRoom();
    }

    await processor.drain();
    expect(await lastDelivery(ws, endpoint)).toMatchObject({ status: 'processed', accepted: 1000, error: null });
    expect((await search(ws, 'Patient')).total).toBe(1000);
  });
});
