/**
 * A delivery that failed for good (here: a database trigger that refuses its records, standing
 * in for a bug) is found with `?status=failed`, sent back with `carepath admin delivery retry`
 * once the cause is gone, and processed; the retry is audited, and only failed deliveries can
 * go back.
 */
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { createEndpoint, deliver, lastDelivery, processorFor, search } from '../helpers/deliveries.js';
import { deliveryList, deliveryRetry } from '../../src/cli/admin/delivery.js';
import { DeliveryProcessor } from '../../src/modules/deliveries/delivery-processor.js';
import { deliveryProcessorService } from '../../src/modules/deliveries/delivery-processor.service.js';
import { workerBasics } from '../../src/container.js';
import type { TestEnv } from '../helpers/test-env.js';

const patients = { resourceType: 'Bundle', type: 'collection', entry: [{ resource: { resourceType: 'Patient', id: 'retry-1', name: [{ family: 'Curie' }] } }] };

/**
 * A cause that is not the store's: a database trigger refuses every record, so every try fails
 * the same way (standing in for a bug) until `work` is done; then the trigger is dropped.
 */
async function whileRecordsAreRefused(env: TestEnv, work: () => Promise<void>): Promise<void> {
  if (env.kind === 'sqlite') {
    await sql.raw(`create trigger refuse_records before insert on records begin select raise(abort, 'refused for the test'); end`).execute(env.db);
  } else {
    await sql.raw(`create or replace function ${env.schema}.refuse() returns trigger language plpgsql as $$ begin raise exception 'refused for the test'; end $$`).execute(env.db);
    await sql.raw(`create trigger refuse_records before insert on ${env.schema}.records for each statement execute function ${env.schema}.refuse()`).execute(env.db);
  }
  try {
    await work();
  } finally {
    await sql.raw(env.kind === 'sqlite' ? 'drop trigger refuse_records' : `drop trigger refuse_records on ${env.schema}.records`).execute(env.db);
  }
}

describeEachStore('retrying a failed delivery', (env) => {
  it('lists it under ?status=failed, puts it back to received, and it is processed', async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    expect((await deliver(env, endpoint, patients, { key: 'retry-me' })).statusCode).toBe(202);

    await whileRecordsAreRefused(env, async () => {
      await processorFor(env, { maxAttempts: 1 }).drain();
    });
    const failed = await lastDelivery(ws, endpoint);
    expect(failed).toMatchObject({ status: 'failed', error: expect.stringMatching(/^processing failed/) });
    const listed = (await ws.call('GET', `/v1/webhooks/${endpoint.webhookId}/deliveries?status=failed`)).json();
    expect(listed.data.map((d: { deliveryId: string }) => d.deliveryId)).toEqual([failed.deliveryId]);
    expect((await ws.call('GET', `/v1/webhooks/${endpoint.webhookId}/deliveries?status=processed`)).json().data).toEqual([]);
    expect((await ws.call('GET', `/v1/webhooks/${endpoint.webhookId}/deliveries?status=lost`)).statusCode).toBe(400);

    expect(await deliveryRetry(env.container, { deliveryId: failed.deliveryId })).toEqual({ deliveryId: failed.deliveryId, webhookId: endpoint.webhookId, status: 'received' });
    expect(await lastDelivery(ws, endpoint)).toMatchObject({ status: 'received', error: null, processedAt: null });
    await processorFor(env).drain();
    expect(await lastDelivery(ws, endpoint)).toMatchObject({ status: 'processed', error: null });
    expect((await search(ws, 'Patient')).total).toBe(1);

    const audit = (await ws.call('GET', '/v1/audit-events?action=delivery.retry')).json().data;
    expect(audit).toEqual([
      expect.objectContaining({ keyName: 'carepath admin', resourceType: 'delivery', resourceId: failed.deliveryId, details: { webhookId: endpoint.webhookId, previousError: failed.error } }),
    ]);
    // The endpoint deleted: the API no longer lists its deliveries, the admin command does.
    expect((await ws.call('DELETE', `/v1/webhooks/${endpoint.webhookId}`)).statusCode).toBe(204);
    expect((await ws.call('GET', `/v1/webhooks/${endpoint.webhookId}/deliveries`)).statusCode).toBe(404);
    const other = await createEndpoint(ws);
    expect((await deliver(env, other, patients, { key: 'second' })).statusCode).toBe(202);
    const all = await deliveryList(env.container, { workspaceId: ws.workspaceId, limit: 100 });
    expect(all.map((d) => [d.webhookId, d.endpointDeleted, d.status])).toEqual([
      [other.webhookId, false, 'received'],
      [endpoint.webhookId, true, 'processed'],
    ]);
    expect(all[1]).toMatchObject({ deliveryId: failed.deliveryId, idempotencyKey: 'retry-me', attempts: expect.any(Number) });
    expect(all[1]).not.toHaveProperty('skipped');
    expect(await deliveryList(env.container, { workspaceId: ws.workspaceId, status: 'failed', limit: 100 })).toEqual([]);
    expect(await deliveryList(env.container, { workspaceId: ws.workspaceId, limit: 1 })).toHaveLength(1);

    // Processed now: it cannot go back again, and ids that name nothing are refused.
    await expect(deliveryRetry(env.container, { deliveryId: failed.deliveryId })).rejects.toThrow(`delivery ${failed.deliveryId} is processed, not failed`);
    await expect(deliveryRetry(env.container, { deliveryId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b' })).rejects.toThrow('no delivery has the id');
    await expect(deliveryRetry(env.container, { deliveryId: 'not-an-id' })).rejects.toThrow('no delivery has the id');
  });

  it('retries a failing delivery after 2, 4, 8 and 16 s, and fails it for good at the fifth attempt (the default)', async () => {
    // The processor's own settings, as a deployment has them (no maxAttempts given), on a clock
    // that stands still: each retry's wait is exactly the lease the failed try leaves. Waits in
    // seconds: a wait of 2 ms would spend the five tries within a few polls, before any cause
    // could be fixed.
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    // What earlier tests left waiting is processed first: each batch below is this delivery's alone.
    await processorFor(env).drain();
    expect((await deliver(env, endpoint, patients, { key: 'failing' })).statusCode).toBe(202);
    const deliveryId = (await lastDelivery(ws, endpoint)).deliveryId as string;
    const now = new Date(Date.now() + 1_000);
    const processor = new DeliveryProcessor({ ...workerBasics(env.container), clock: { now: () => now }, reader: env.container.deliveryReader });
    const row = () =>
      env.db.selectFrom('deliveries').select(['status', 'attempts', 'error', 'lease_expires_at']).where('id', '=', deliveryId).executeTakeFirstOrThrow();
    // The error names the kind of failure, never data (the database's message quotes the test's words).
    const kindOfFailure = /^processing failed \([^)]*\)$/;

    await whileRecordsAreRefused(env, async () => {
      for (let attempt = 1; attempt <= 4; attempt++) {
        expect(await processor.processBatch()).toBe(1);
        const failedTry = await row();
        expect(failedTry).toMatchObject({ status: 'processing', attempts: attempt, error: expect.stringMatching(kindOfFailure) });
        expect(Date.parse(failedTry.lease_expires_at!) - now.getTime()).toBe(1000 * 2 ** attempt);
        // Not due before its wait is over: the same clock claims nothing.
        expect(await processor.processBatch()).toBe(0);
        // The wait is over.
        await env.db.updateTable('deliveries').set({ lease_expires_at: new Date(now.getTime() - 1).toISOString() }).where('id', '=', deliveryId).execute();
      }
      expect(await processor.processBatch()).toBe(1);
    });
    const last = await row();
    expect(last).toMatchObject({ status: 'failed', attempts: 5, error: expect.stringMatching(kindOfFailure) });
    expect(last.error).not.toContain('refused for the test');
    expect(await lastDelivery(ws, endpoint)).toMatchObject({ deliveryId, status: 'failed', error: last.error });
    // Failed for good: nothing claims it again.
    expect(await processor.processBatch()).toBe(0);
  });
});

describeEachStore('the delivery processor of a starting process', (env) => {
  it('takes no delivery until its FHIR validation is compiled: a process killed while starting uses up no attempt', async () => {
    // Each claim counts an attempt; a process restarted again and again took deliveries before
    // it could process them, and marked valid ones failed after five starts (a durability review).
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    expect((await deliver(env, endpoint, patients, { key: 'while-warming' })).statusCode).toBe(202);
    const row = () => env.db.selectFrom('deliveries').select(['status', 'attempts']).where('webhook_id', '=', endpoint.webhookId).executeTakeFirstOrThrow();
    const reader = env.container.deliveryReader;
    const warm = reader.warm;
    let compiled!: () => void;
    reader.warm = () => new Promise<number>((resolve) => (compiled = () => resolve(1)));
    const service = await deliveryProcessorService({ pollMs: 20 }).start(env.container);
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await row()).toEqual({ status: 'received', attempts: 0 });
      compiled();
      // The reader's thread still compiles the validation for real at the first body (the warm-up
      // above was the test's): up to 11 s on a slow or busy machine.
      await expect.poll(async () => (await row()).status, { timeout: 40_000, interval: 50 }).toBe('processed');
      expect((await row()).attempts).toBe(1);
    } finally {
      reader.warm = warm;
      await service.stop();
    }
  }, 60_000);
});
