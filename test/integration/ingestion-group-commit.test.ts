import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { bundle, createEndpoint, deliver, eventTrigger, processorFor, runsOf, search, type Endpoint } from '../helpers/deliveries.js';
import { parsedHandoffFor } from '../../src/modules/deliveries/parsed-handoff.js';
import { claimDeliveries } from '../../src/modules/deliveries/delivery.repository.js';
import { refuseStateOf } from '../helpers/refused-states.js';

/**
 * Deliveries claimed together are applied in one transaction (delivery-apply.ts
 * `applyDeliveries`): the outcome must be that of applying them one after the other, and one
 * delivery that fails must fail alone.
 */
describeEachStore('deliveries claimed together', (env) => {
  const encounter = (id: string, status: string) => ({
    resourceType: 'Encounter',
    id,
    status,
    class: { code: 'AMB' },
    subject: { reference: 'Patient/group-p' },
  });

  async function listed(ws: Awaited<ReturnType<typeof env.workspace>>, endpoint: Endpoint) {
    const res = await ws.call('GET', `/v1/webhooks/${endpoint.webhookId}/deliveries`);
    expect(res.statusCode, res.body).toBe(200);
    return (res.json().data as { idempotencyKey: string; status: string; events: unknown; runsStarted: number; error: string | null }[]).sort((a, b) =>
      a.idempotencyKey < b.idempotencyKey ? -1 : 1,
    );
  }

  it('each sees what the ones before it wrote: created then updated, a status event per change, nothing for the unchanged', async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    const trigger = await eventTrigger(ws, 'Encounter.finished');
    const bodies = [
      bundle([{ resourceType: 'Patient', id: 'group-p', name: [{ family: 'Group' }], meta: { tag: [{ code: 'first' }] } }, encounter('e1', 'planned')]),
      bundle([encounter('e1', 'finished')]),
      bundle([encounter('e1', 'finished'), { resourceType: 'Patient', id: 'group-p', name: [{ family: 'Group' }], meta: { tag: [{ code: 'second' }] } }]),
    ];
    for (const [i, body] of bodies.entries()) expect((await deliver(env, endpoint, body, { key: `g-${i}` })).statusCode).toBe(202);

    // One claim of all three: one group, one transaction.
    expect(await processorFor(env, { batch: 10 }).processBatch()).toBe(3);
    const deliveries = await listed(ws, endpoint);
    expect(deliveries.map((d) => [d.status, d.events, d.runsStarted])).toEqual([
      ['processed', [{ event: 'Encounter.created', count: 1 }, { event: 'Encounter.planned', count: 1 }, { event: 'Patient.created', count: 1 }], 0],
      ['processed', [{ event: 'Encounter.finished', count: 1 }, { event: 'Encounter.updated', count: 1 }], 1],
      // The Encounter as the second delivery left it: unchanged, no event.
      ['processed', [{ event: 'Patient.updated', count: 1 }], 0],
    ]);
    expect(await runsOf(ws, `triggerId=${trigger.triggerId}`)).toHaveLength(1);
    // The last delivery's tags replaced the ones the first gave the record.
    const found = await search(ws, 'Patient');
    expect(found.results.map((hit) => [hit.extId, hit.tags])).toEqual([['group-p', ['second']]]);
  });

  it('applies them one by one when the group fails, so only the bad one waits for its retry', async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    const cure = await refuseStateOf(env, 'poison');
    try {
      const patient = (id: string) => ({ resourceType: 'Patient', id, name: [{ family: id }] });
      for (const id of ['good-1', 'poison', 'good-2']) expect((await deliver(env, endpoint, patient(id), { key: id })).statusCode).toBe(202);
      expect(await processorFor(env, { batch: 10 }).processBatch()).toBe(3);

      const deliveries = await listed(ws, endpoint);
      expect(deliveries.map((d) => [d.idempotencyKey, d.status])).toEqual([
        ['good-1', 'processed'],
        ['good-2', 'processed'],
        ['poison', 'processing'],
      ]);
      // The kind of failure only: the store's message could quote the data.
      expect(deliveries[2].error).toMatch(/^processing failed \(/);
      expect(deliveries[2].error).not.toContain('poison');
      expect((await search(ws, 'Patient')).results.map((hit) => hit.extId).sort()).toEqual(['good-1', 'good-2']);
    } finally {
      await cure();
    }
  });

  it('a delivery claimed at intake whose lease ran out before its processor took it is applied once, not claimed twice', async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    // The intake claims for this processor with a lease of 1 ms, and the processor is slow to
    // take them (a backlog): when it does, the store also offers them again (lease run out).
    const processor = processorFor(env, { leaseMs: 1 });
    const claimant = (processor as unknown as { claimant: { owner: string; leaseMs: number } }).claimant;
    const handoff = parsedHandoffFor(env.db);
    handoff.attach(claimant);
    try {
      const patient = (i: number) => ({ resourceType: 'Patient', id: `late-${i}`, name: [{ family: `Late ${i}` }] });
      for (let i = 0; i < 3; i++) expect((await deliver(env, endpoint, patient(i), { key: `late-${i}` })).statusCode).toBe(202);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await processor.processBatch()).toBe(3);
      expect((await listed(ws, endpoint)).map((d) => [d.idempotencyKey, d.status, d.error])).toEqual([
        ['late-0', 'processed', null],
        ['late-1', 'processed', null],
        ['late-2', 'processed', null],
      ]);
      expect((await search(ws, 'Patient')).total).toBe(3);
    } finally {
      handoff.detach(claimant);
    }
  });

  it('a processor holds the leases of the deliveries it works on: another cannot claim one that outlasts its lease', async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    expect((await deliver(env, endpoint, { resourceType: 'Patient', id: 'held-1' }, { key: 'held-1' })).statusCode).toBe(202);
    const slow = processorFor(env, { leaseMs: 90 });
    const other = processorFor(env, { leaseMs: 90 });
    const owner = (slow as unknown as { owner: string }).owner;
    const now = new Date();
    const [claimed] = await claimDeliveries(env.db, env.container.store.dialect, owner, now.toISOString(), new Date(now.getTime() + 90).toISOString(), 10);
    expect(claimed.idempotency_key).toBe('held-1');
    // As processBatch does while it works: the lease is renewed every third of it.
    const stopHolding = (slow as unknown as { holdWhileProcessing(ids: string[]): () => void }).holdWhileProcessing([claimed.id]);
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await other.processBatch()).toBe(0);
    } finally {
      stopHolding();
    }
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await other.processBatch()).toBe(1);
    expect((await listed(ws, endpoint)).map((d) => d.status)).toEqual(['processed']);
  });

  it('a running processor, woken by deliveries stored here, lets a burst gather and applies it from memory', async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    const processor = processorFor(env, { pollMs: 60_000, gatherMs: 20 });
    processor.start();
    try {
      const patient = (i: number) => ({ resourceType: 'Patient', id: `burst-${i}`, name: [{ family: `Burst ${i}` }] });
      const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => deliver(env, endpoint, patient(i), { key: `burst-${i}` })));
      expect(answers.map((a) => a.statusCode)).toEqual(Array(6).fill(202));
      // No poll within the test: only the wake-ups by the stored deliveries can get them processed.
      for (let waited = 0; waited < 10_000; waited += 20) {
        if ((await listed(ws, endpoint)).every((d) => d.status === 'processed')) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect((await listed(ws, endpoint)).map((d) => d.status)).toEqual(Array(6).fill('processed'));
      expect((await search(ws, 'Patient')).total).toBe(6);
    } finally {
      await processor.stop();
    }
  });
});
