import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import {
  createEndpoint,
  deliverAndProcess,
  eventTrigger,
  runsOf,
  savedQuery,
  search,
  searchTrigger,
} from '../helpers/deliveries.js';

const patient = (id: string, tag: string) => ({
  resourceType: 'Patient',
  id,
  name: [{ family: `Family ${id}` }],
  meta: { tag: [{ code: tag }] },
});
const encounter = (id: string, patientId: string) => ({
  resourceType: 'Encounter',
  id,
  status: 'finished',
  class: { code: 'AMB' },
  subject: { reference: `Patient/${patientId}` },
});

describeEachStore('inbound data stays in its workspace', (env) => {
  /** Every run of these triggers in the store, whatever its workspace. */
  const runsOfTriggers = (triggerIds: string[]) =>
    env.db.selectFrom('runs').select(['workspace_id', 'trigger_id']).where('trigger_id', 'in', triggerIds).execute();

  it("a delivery to workspace A never shows in B's search and never starts B's runs", async () => {
    const a = await env.workspace('tenant-iso');
    const sibling = await env.workspace('tenant-iso'); // same tenant, another workspace
    const stranger = await env.workspace(); // another tenant
    const feedA = await createEndpoint(a);
    const triggerA = await eventTrigger(a, 'Encounter.finished');
    const siblingTrigger = await eventTrigger(sibling, 'Encounter.finished');
    const strangerTrigger = await eventTrigger(stranger, 'Encounter.finished');
    const strangerCohort = await searchTrigger(stranger, (await savedQuery(stranger, 'Patient', [{ op: 'with', tag: 'shared-tag' }])).queryId, { onePerSubject: false });

    await deliverAndProcess(env, feedA, {
      resourceType: 'Bundle',
      type: 'collection',
      entry: [{ resource: patient('same-id', 'shared-tag') }, { resource: encounter('enc-a', 'same-id') }],
    });

    expect((await search(a, 'Patient')).total).toBe(1);
    expect((await runsOf(a, `triggerId=${triggerA.triggerId}`)).length).toBe(1);
    // Unfiltered: A's delivery started exactly one run, its own trigger's; the other workspaces'
    // triggers on the same event started none, in any workspace (a run of B's trigger made in A
    // would not show under B, nor under A filtered by A's trigger).
    expect((await runsOf(a, '')).map((run) => run.triggerId)).toEqual([triggerA.triggerId]);
    expect(await runsOfTriggers([siblingTrigger.triggerId, strangerTrigger.triggerId])).toEqual([]);
    for (const other of [sibling, stranger]) {
      expect((await search(other, 'Patient')).total).toBe(0);
      expect((await search(other, 'Patient', [{ op: 'with', tag: 'shared-tag' }])).total).toBe(0);
      expect(await runsOf(other, '')).toHaveLength(0);
      expect((await other.call('GET', `/v1/webhooks/${feedA.webhookId}/deliveries`)).statusCode).toBe(404);
    }
    expect(await runsOf(sibling, `triggerId=${siblingTrigger.triggerId}`)).toHaveLength(0);
    expect(await runsOf(stranger, `triggerId=${strangerTrigger.triggerId}`)).toHaveLength(0);
    const evaluation = await stranger.call('POST', `/v1/triggers/${strangerCohort.triggerId}/evaluate`);
    expect(evaluation.json()).toMatchObject({ started: 0, skipped: 0 });

    // The same resource ids in another workspace are another record, with its own state.
    const feedB = await createEndpoint(sibling);
    await deliverAndProcess(env, feedB, {
      resourceType: 'Bundle',
      type: 'collection',
      entry: [{ resource: patient('same-id', 'other-tag') }, { resource: encounter('enc-a', 'same-id') }],
    });
    expect((await search(sibling, 'Patient')).results.map((hit) => hit.tags)).toEqual([['other-tag']]);
    expect((await search(a, 'Patient')).results.map((hit) => hit.tags)).toEqual([['shared-tag']]);
    expect((await runsOf(sibling, `triggerId=${siblingTrigger.triggerId}`)).length).toBe(1);
    expect((await runsOf(a, `triggerId=${triggerA.triggerId}`)).length).toBe(1);
    // B's delivery, the same event, started only B's trigger: still one run each, none for the stranger.
    expect((await runsOf(sibling, '')).map((run) => run.triggerId)).toEqual([siblingTrigger.triggerId]);
    expect((await runsOf(a, '')).map((run) => run.triggerId)).toEqual([triggerA.triggerId]);
    expect(await runsOfTriggers([triggerA.triggerId, strangerTrigger.triggerId])).toEqual([
      { workspace_id: a.workspaceId, trigger_id: triggerA.triggerId },
    ]);
    const listing = await sibling.call('GET', `/v1/webhooks/${feedB.webhookId}/deliveries`);
    // Created, not updated: A's state of the same resource is not B's.
    expect(listing.json().data[0].events).toContainEqual({ event: 'Encounter.created', count: 1 });
  });
});
